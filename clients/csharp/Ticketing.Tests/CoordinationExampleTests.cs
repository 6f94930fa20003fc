using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Text.RegularExpressions;
using NUnit.Framework;
using Ticketing.Coordination;

namespace Ticketing.Tests
{
    /// <summary>
    /// The README's coordination examples (a lock, an election, service
    /// discovery) are the program CoordinationExample/Program.cs, compiled
    /// against the library as CI builds it and run against a real server.
    /// </summary>
    [TestFixture]
    public class CoordinationExampleTests
    {
        const string Source = "clients/csharp/CoordinationExample/Program.cs";

        /// <summary>The program's regions between "// example: NAME" and "// end", dedented, by name.</summary>
        static Dictionary<string, string> Regions()
        {
            var lines = File.ReadAllLines(VectorTests.RepoFile(Source));
            var regions = new Dictionary<string, string>();
            for (int i = 0; i < lines.Length; i++)
            {
                var m = Regex.Match(lines[i], @"^\s*// example: (\w+)$");
                if (!m.Success) continue;
                int end = Array.FindIndex(lines, i + 1, l => l.Trim() == "// end");
                Assert.Greater(end, i, "example " + m.Groups[1].Value + " has no // end");
                var body = lines.Skip(i + 1).Take(end - i - 1).ToList();
                int indent = body.Where(l => l.Trim().Length > 0).Min(l => l.Length - l.TrimStart().Length);
                regions[m.Groups[1].Value] = string.Join("\n", body.Select(l => l.Length >= indent ? l.Substring(indent) : l.TrimStart()));
            }
            return regions;
        }

        [Test]
        public void TheReadmeShowsTheExamplesAsTheyAreRun()
        {
            var readme = File.ReadAllText(VectorTests.RepoFile("clients/csharp/README.md")).Replace("\r\n", "\n");
            var regions = Regions();
            CollectionAssert.AreEquivalent(new[] { "lock", "election", "discovery" }, regions.Keys, "the examples of " + Source);
            foreach (var r in regions)
                Assert.IsTrue(readme.Contains("```csharp\n" + r.Value + "\n```"),
                    "clients/csharp/README.md does not show the " + r.Key + " example of " + Source + " as it is (copy the lines between // example: " + r.Key + " and // end):\n" + r.Value);
        }

        [Test]
        public void TheExamplesRunAgainstARealServerAndLeaveNothingHeld()
        {
            var exe = Environment.GetEnvironmentVariable("TICKETING_COORDINATION_EXAMPLE");
            if (string.IsNullOrEmpty(exe) || !File.Exists(exe))
                Assert.Fail("TICKETING_COORDINATION_EXAMPLE must name CoordinationExample.exe compiled from clients/csharp/CoordinationExample (clients/csharp/test.sh does); it is \"" + exe + "\"");
            using (var c = new Cluster(1))
            {
                var psi = new ProcessStartInfo("mono", "\"" + exe + "\" " + c.Addrs[0])
                { UseShellExecute = false, RedirectStandardOutput = true, RedirectStandardError = true };
                string output;
                using (var p = Process.Start(psi))
                {
                    var err = p.StandardError.ReadToEndAsync();
                    output = p.StandardOutput.ReadToEnd();
                    Assert.IsTrue(p.WaitForExit(U.Patience), "the example did not end");
                    Assert.AreEqual(0, p.ExitCode, "the example failed: " + output + err.Result);
                }
                StringAssert.IsMatch(@"(?m)^nightly run with token [1-9][0-9]*\r?$", output);
                StringAssert.IsMatch(@"(?m)^leader 10\.0\.0\.7:8080 with token [1-9][0-9]*\r?$", output);
                StringAssert.IsMatch(@"(?m)^member 10\.0\.0\.7:8080 of session [1-9][0-9]*\r?$", output);
                using (var b = U.Ready(U.Connect(c.AddrList)))
                {
                    var cc = new CoordinationClient(b);
                    Assert.AreEqual(0, U.Get(cc.ListSessionsAsync("/jobs")).Count, "the example left its session");
                    var s = U.Get(cc.StartSessionAsync("/jobs"));
                    Assert.AreEqual(0, U.Get(s.DescribeSemaphoreAsync("recipe/mutex/nightly", new DescribeOptions { Owners = true })).Owners.Count, "the lock is still held");
                    Assert.AreEqual(0UL, U.Get(s.Election("scheduler").GetLeaderAsync()).Session, "the example still leads");
                    Assert.AreEqual(0, U.Get(s.Discovery("api").ListAsync()).Count, "the example is still registered");
                    U.Wait(cc.DisposeAsync().AsTask());
                }
            }
        }
    }
}
