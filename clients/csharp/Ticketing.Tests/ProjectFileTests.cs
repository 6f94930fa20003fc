using System;
using System.IO;
using System.Linq;
using System.Text.RegularExpressions;
using NUnit.Framework;

namespace Ticketing.Tests
{
    /// <summary>
    /// The csproj files build the same sources for .NET as test.sh builds with
    /// Mono (no machine here has the .NET SDK to try them): the SDK compiles
    /// every .cs file under a project's directory, test.sh compiles DIR/*.cs,
    /// so the two agree while the projects add or remove no Compile items and
    /// no source sits in a subdirectory.
    /// </summary>
    [TestFixture]
    public class ProjectFileTests
    {
        static string Dir(string project) { return Path.GetDirectoryName(VectorTests.RepoFile("clients/csharp/" + project + "/" + project + ".csproj")); }

        static string Csproj(string project) { return File.ReadAllText(VectorTests.RepoFile("clients/csharp/" + project + "/" + project + ".csproj")); }

        /// <summary>The project's sources the SDK's default glob takes (bin and obj are the SDK's own), relative to its directory.</summary>
        static string[] SdkSources(string project)
        {
            var dir = Dir(project);
            return Directory.GetFiles(dir, "*.cs", SearchOption.AllDirectories)
                .Select(f => f.Substring(dir.Length + 1).Replace('\\', '/'))
                .Where(f => !f.StartsWith("bin/", StringComparison.Ordinal) && !f.StartsWith("obj/", StringComparison.Ordinal))
                .OrderBy(f => f, StringComparer.Ordinal).ToArray();
        }

        [TestCase("Ticketing")]
        [TestCase("Ticketing.Tests")]
        public void TheSdkCompilesTheSourcesTestShCompiles(string project)
        {
            var csproj = Csproj(project);
            StringAssert.Contains("<Project Sdk=\"Microsoft.NET.Sdk\">", csproj);
            Assert.IsFalse(Regex.IsMatch(csproj, @"<Compile\s"), project + ".csproj adds or removes Compile items: test.sh compiles " + project + "/*.cs, nothing else");
            Assert.IsFalse(Regex.IsMatch(csproj, @"EnableDefault(Compile)?Items>\s*false"), project + ".csproj turns the SDK's default sources off");
            var nested = SdkSources(project).Where(f => f.Contains("/")).ToArray();
            Assert.IsEmpty(nested, "sources in a subdirectory of " + project + "/ are compiled by the SDK but not by test.sh (" + project + "/*.cs): move them up");
            Assert.IsNotEmpty(SdkSources(project));
            var testSh = File.ReadAllText(VectorTests.RepoFile("clients/csharp/test.sh"));
            StringAssert.Contains(" " + project + "/*.cs", testSh, "test.sh no longer compiles " + project + "/*.cs");
        }

        [Test]
        public void TheLibraryTargetsWhatTheSourcesAreCheckedAgainst()
        {
            var csproj = Csproj("Ticketing");
            // test.sh checks the sources against netstandard2.0's API level (with NETSTANDARD2_0 defined) and as C# 7.0.
            StringAssert.Contains("<TargetFrameworks>netstandard2.0;net8.0</TargetFrameworks>", csproj);
            StringAssert.Contains("<LangVersion>7.0</LangVersion>", csproj);
            // IAsyncDisposable and ValueTask, which the sources use, come from this package on netstandard2.0.
            Assert.IsTrue(Regex.IsMatch(csproj, @"<ItemGroup Condition=""'\$\(TargetFramework\)' == 'netstandard2.0'"">\s*<PackageReference Include=""Microsoft.Bcl.AsyncInterfaces"""),
                "Ticketing.csproj must reference Microsoft.Bcl.AsyncInterfaces for netstandard2.0");
            StringAssert.Contains("<ProjectReference Include=\"../Ticketing/Ticketing.csproj\" />", Csproj("Ticketing.Tests"));
            // Only symbols the SDK defines for these targets select code.
            var dir = Dir("Ticketing");
            foreach (var f in SdkSources("Ticketing"))
                foreach (Match m in Regex.Matches(File.ReadAllText(Path.Combine(dir, f)), @"(?m)^\s*#(?:el)?if\s+(.+)$"))
                    Assert.IsTrue(Regex.IsMatch(m.Groups[1].Value.Trim(), @"^!?(NETSTANDARD2_0|NET5_0_OR_GREATER|NET8_0_OR_GREATER|NET8_0)$"),
                        f + ": #if " + m.Groups[1].Value.Trim() + " is not a symbol of the csproj's targets");
        }
    }
}
