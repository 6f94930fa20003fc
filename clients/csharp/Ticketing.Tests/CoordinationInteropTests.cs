using System;
using System.Diagnostics;
using System.IO;
using System.Text;
using System.Threading.Tasks;
using NUnit.Framework;
using Ticketing.Coordination;

namespace Ticketing.Tests
{
    /// <summary>A C# and a Go process (internal/coordpeer) sharing one mutex, one election, one service and one published value on one node.</summary>
    [TestFixture]
    public class CoordinationInteropTests
    {
        sealed class GoPeer : IDisposable
        {
            readonly Process p;
            public GoPeer(string addr, string node)
            {
                var bin = Environment.GetEnvironmentVariable("COORDPEER_BIN");
                if (string.IsNullOrEmpty(bin) || !File.Exists(bin))
                    Assert.Fail("COORDPEER_BIN must name coordpeer built from this repository (clients/csharp/test.sh does: go build -o DIR/coordpeer ./internal/coordpeer/cmd/coordpeer); it is \"" + bin + "\"");
                p = Process.Start(new ProcessStartInfo(bin, "-addr " + addr + " -node " + node)
                {
                    UseShellExecute = false, RedirectStandardInput = true, RedirectStandardOutput = true, RedirectStandardError = true,
                });
                p.ErrorDataReceived += (o, e) => { if (e.Data != null) lock (errors) errors.AppendLine(e.Data); };
                p.BeginErrorReadLine();
            }

            readonly StringBuilder errors = new StringBuilder();

            string Errors() { lock (errors) return errors.ToString(); }

            public Task<string> Send(string line)
            {
                p.StandardInput.WriteLine(line);
                p.StandardInput.Flush();
                // A thread of its own: Mono's ReadLineAsync may block the caller.
                return Task.Run(() => p.StandardOutput.ReadLine());
            }

            public string Ask(string line)
            {
                var t = Send(line);
                if (!t.Wait(U.Patience)) Assert.Fail("coordpeer did not answer " + line + " within " + U.Patience + " ms; its stderr: " + Errors());
                var a = t.Result;
                Assert.IsNotNull(a, "coordpeer ended: " + Errors());
                Assert.IsFalse(a.StartsWith("error", StringComparison.Ordinal), "coordpeer: " + line + ": " + a);
                return a;
            }

            public void Dispose()
            {
                try { p.StandardInput.Close(); } catch (Exception) { }
                if (!p.WaitForExit(10000)) try { p.Kill(); } catch (Exception) { }
            }
        }

        static ulong Field(string answer, int i) { return ulong.Parse(answer.Split(' ')[i]); }

        [Test]
        public void CSharpAndGoShareOneMutexAndOneElection()
        {
            using (var c = new Cluster(1))
            using (var b = U.Ready(U.Connect(c.AddrList)))
            {
                var cc = new CoordinationClient(b);
                U.Wait(cc.CreateNodeAsync("/interop"));
                var s = U.Get(cc.StartSessionAsync("/interop"));
                using (var go = new GoPeer(c.AddrList, "/interop"))
                {
                    var m = s.Mutex("m");
                    // Go holds it: C# cannot take it.
                    var goLocked = go.Ask("trylock m");
                    StringAssert.StartsWith("locked ", goLocked);
                    Assert.IsNull(U.Get(m.TryAcquireAsync()), "C# took a mutex Go holds");
                    // Go lets go: C# takes it, with a later token; now Go cannot.
                    Assert.AreEqual("unlocked", go.Ask("unlock m"));
                    var held = U.Get(m.AcquireAsync());
                    Assert.Greater(held.Token, Field(goLocked, 1));
                    Assert.AreEqual("busy", go.Ask("trylock m"));
                    // A Go waiter gets it once C# releases it.
                    var goWaits = go.Send("lock m");
                    U.Wait(held.ReleaseAsync());
                    var after = U.Get(goWaits);
                    StringAssert.StartsWith("locked ", after);
                    Assert.Greater(Field(after, 1), held.Token);
                    Assert.AreEqual("unlocked", go.Ask("unlock m"));

                    // C# leads: Go sees C#'s session, fencing token and data.
                    var e = s.Election("e");
                    var lead = U.Get(e.CampaignAsync(Encoding.UTF8.GetBytes("cs")));
                    var seen = go.Ask("leader e").Split(' ');
                    Assert.AreEqual(s.Id.ToString(), seen[1]);
                    Assert.AreEqual(lead.Token.ToString(), seen[2]);
                    Assert.AreEqual("cs", seen[3]);
                    // Go campaigns and leads once C# resigns; C# sees Go's leadership.
                    var goCampaign = go.Send("campaign e go");
                    U.Wait(lead.DisposeAsync().AsTask());
                    var goLead = U.Get(goCampaign);
                    StringAssert.StartsWith("leading ", goLead);
                    var li = U.Get(e.GetLeaderAsync());
                    Assert.AreEqual(Field(goLead, 1), li.Token);
                    Assert.Greater(li.Token, lead.Token);
                    Assert.AreNotEqual(s.Id, li.Session);
                    Assert.AreEqual("go", Encoding.UTF8.GetString(li.GetData()));
                }
                U.Wait(cc.DisposeAsync().AsTask());
            }
        }

        [Test]
        public void CSharpAndGoShareOneServiceOnePublishedValueAndObserveOneLeader()
        {
            using (var c = new Cluster(1))
            using (var b = U.Ready(U.Connect(c.AddrList)))
            {
                var cc = new CoordinationClient(b);
                U.Wait(cc.CreateNodeAsync("/interop"));
                var s = U.Get(cc.StartSessionAsync("/interop"));
                using (var go = new GoPeer(c.AddrList, "/interop"))
                {
                    var goSession = go.Ask("session").Split(' ')[1];

                    // Discovery: a C# watcher sees members of both languages come and go.
                    var d = s.Discovery("api");
                    var watcher = d.Watch();
                    Assert.AreEqual(0, U.Get(watcher.NextAsync()).Count, "nobody is registered yet");
                    var goToken = Field(go.Ask("register api go:1"), 1);
                    var seen = U.Get(watcher.NextAsync());
                    Assert.AreEqual(1, seen.Count);
                    Assert.AreEqual(goSession, seen[0].Session.ToString());
                    Assert.AreEqual(goToken, seen[0].Token);
                    Assert.AreEqual("go:1", Encoding.UTF8.GetString(seen[0].GetData()));
                    var mine = U.Get(d.RegisterAsync(Encoding.UTF8.GetBytes("cs:2")));
                    Assert.AreEqual(2, U.Get(watcher.NextAsync()).Count);
                    Assert.AreEqual("endpoints " + goSession + ":" + goToken + ":go:1 " + s.Id + ":" + mine.Token + ":cs:2", go.Ask("endpoints api"));
                    Assert.AreEqual("deregistered", go.Ask("deregister api"));
                    var left = U.Get(watcher.NextAsync());
                    Assert.AreEqual(1, left.Count);
                    Assert.AreEqual(s.Id, left[0].Session);
                    U.Wait(mine.DisposeAsync().AsTask());
                    Assert.AreEqual(0, U.Get(d.ListAsync()).Count);
                    Assert.AreEqual("endpoints", go.Ask("endpoints api"));

                    // Publication: a value published by one is read and watched by the other.
                    var p = s.Publication("limits");
                    Assert.AreEqual("unset", go.Ask("get limits"));
                    var values = p.Watch();
                    Assert.IsNull(U.Get(values.NextAsync()), "not published yet");
                    Assert.AreEqual("published", go.Ask("publish limits rps=100"));
                    Assert.AreEqual("rps=100", Encoding.UTF8.GetString(U.Get(values.NextAsync())));
                    U.Wait(p.PublishAsync(Encoding.UTF8.GetBytes("rps=200")));
                    Assert.AreEqual("value rps=200", go.Ask("get limits"));
                    Assert.AreEqual("rps=200", Encoding.UTF8.GetString(U.Get(p.GetAsync())));
                    Assert.AreEqual("rps=200", Encoding.UTF8.GetString(U.Get(values.NextAsync())));

                    // Election observed from C#: Go leads, resigns, nobody leads.
                    var leaders = s.Election("e").Observe();
                    Assert.AreEqual(0UL, U.Get(leaders.NextAsync()).Session, "nobody leads yet");
                    var goLead = Field(go.Ask("campaign e go"), 1);
                    var li = U.Get(leaders.NextAsync());
                    Assert.AreEqual(goSession, li.Session.ToString());
                    Assert.AreEqual(goLead, li.Token);
                    Assert.AreEqual("go", Encoding.UTF8.GetString(li.GetData()));
                    Assert.AreEqual("resigned", go.Ask("resign e"));
                    Assert.AreEqual(0UL, U.Get(leaders.NextAsync()).Session);
                }
                U.Wait(cc.DisposeAsync().AsTask());
            }
        }
    }
}
