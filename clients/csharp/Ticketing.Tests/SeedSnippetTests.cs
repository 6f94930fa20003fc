using System;
using System.Diagnostics;
using System.IO;
using System.Text;
using NUnit.Framework;

namespace Ticketing.Tests
{
    /// <summary>
    /// The product documentation's C# code (a copy of the page in
    /// Seed/ticketing-client-csharp.ru.txt) compiles unchanged against the
    /// library: its builder snippet still says Addrs, the name Addresses had
    /// before the .NET naming pass, kept as an [Obsolete] alias.
    /// </summary>
    [TestFixture]
    public class SeedSnippetTests
    {
        const string Page = "clients/csharp/Ticketing.Tests/Seed/ticketing-client-csharp.ru.txt";

        /// <summary>
        /// The builder snippet as the page has it: from the line that starts
        /// "var broker = TicketBroker.CreateBuilder()" to the first code line
        /// that ends the statement, its comment lines included.
        /// </summary>
        internal static string BuilderSnippet(string page)
        {
            var lines = page.Replace("\r\n", "\n").Split('\n');
            int start = Array.FindIndex(lines, l => l.TrimStart().StartsWith("var broker = TicketBroker.CreateBuilder()", StringComparison.Ordinal));
            Assert.GreaterOrEqual(start, 0, "the page has no builder snippet (a line starting \"var broker = TicketBroker.CreateBuilder()\")");
            var sb = new StringBuilder();
            for (int i = start; i < lines.Length; i++)
            {
                sb.Append("        ").Append(lines[i]).Append('\n');
                var code = lines[i].Trim();
                if (!code.StartsWith("//", StringComparison.Ordinal) && code.EndsWith(";", StringComparison.Ordinal)) return sb.ToString();
            }
            Assert.Fail("the builder snippet never ends with a ';'");
            return null;
        }

        /// <summary>Every renamed member answers under its former name, as under its new one.</summary>
        [Test]
        public void FormerNamesAreAliasesOfTheNewOnes()
        {
#pragma warning disable 618 // the former names are what this test calls
            Assert.AreEqual(TicketBroker.MaxKeyBytes, TicketBroker.MaxKey);
            var notLeader = new NotLeaderException("10.0.0.1:5225", "10.0.0.2:5225");
            Assert.AreEqual("10.0.0.1:5225", notLeader.Addr);
            Assert.AreEqual("10.0.0.2:5225", notLeader.LeaderAddr);
            Assert.IsNull(new UnavailableException("no address").Addr);
            var e = Assert.Throws<ArgumentException>(() => TicketBroker.CreateBuilder().Addrs(" "));
            Assert.AreEqual("addresses", e.ParamName);
#pragma warning restore 618
        }

        /// <summary>The compiler the suite itself is built with (clients/csharp/test.sh: Mono's mcs, C# 7).</summary>
        static string Compiler()
        {
            var c = Environment.GetEnvironmentVariable("TICKETING_CSHARP_COMPILER");
            return string.IsNullOrEmpty(c) ? "mcs" : c;
        }

        [Test]
        public void TheDocumentationsBuilderSnippetCompilesUnchanged()
        {
            var snippet = BuilderSnippet(File.ReadAllText(VectorTests.RepoFile(Page), Encoding.UTF8));
            StringAssert.Contains(".Addrs(", snippet, "the page's snippet uses the former name; this test is about compiling it unchanged");
            var dir = Path.Combine(Path.GetTempPath(), "ticketing-seed-" + Guid.NewGuid().ToString("N"));
            Directory.CreateDirectory(dir);
            try
            {
                var src = Path.Combine(dir, "Snippet.cs");
                File.WriteAllText(src, "using System;\nusing Ticketing;\n\nstatic class Snippet\n{\n    static void Build()\n    {\n" + snippet + "    }\n}\n");
                var lib = typeof(TicketBroker).Assembly.Location;
                var psi = new ProcessStartInfo(Compiler(),
                    "-langversion:7 -target:library -out:\"" + Path.Combine(dir, "Snippet.dll") + "\" -r:\"" + lib + "\" \"" + src + "\"")
                {
                    UseShellExecute = false,
                    RedirectStandardOutput = true,
                    RedirectStandardError = true,
                };
                Process p;
                try { p = Process.Start(psi); }
                catch (Exception e)
                {
                    Assert.Fail("could not run the C# compiler \"" + psi.FileName + "\" (" + e.Message + "): install Mono's mcs (apt-get install mono-devel) or set TICKETING_CSHARP_COMPILER");
                    return;
                }
                using (p)
                {
                    var stderr = p.StandardError.ReadToEndAsync();
                    var output = p.StandardOutput.ReadToEnd() + stderr.Result;
                    Assert.IsTrue(p.WaitForExit(U.Patience), "the compiler did not finish within " + U.Patience + " ms");
                    Assert.AreEqual(0, p.ExitCode, "the page's builder snippet does not compile against the library:\n" + snippet + "\n" + output);
                    // It compiles with a warning that names the new member.
                    StringAssert.Contains("CS0618", output, output);
                    StringAssert.Contains("Addresses", output, output);
                }
            }
            finally
            {
                Directory.Delete(dir, true);
            }
        }
    }
}
