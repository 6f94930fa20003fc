using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;

namespace Ticketing.Tests
{
    /// <summary>A planned restart (SIGTERM) of a real cluster's leader under load.</summary>
    [TestFixture]
    public class PlannedRestartTests
    {
        /// <summary>
        /// The leader of three servers stopped with SIGTERM and started
        /// again while clients acquire and release in a loop: the stopping
        /// leader answers what it proposed and ends its sessions with E 11,
        /// and the client sends the acquires still pending again with the
        /// same owners. No acquire ends indeterminate and no release fails.
        /// Failure detection is slow (3 s) so that a loaded machine causes no
        /// unplanned election, which may leave an acquire indeterminate.
        /// </summary>
        [Test]
        public void LeaderStoppedWithSigtermLeavesNoAcquireIndeterminate()
        {
            var config = Path.GetTempFileName();
            File.WriteAllText(config, "heartbeat_timeout = \"3s\"\nelection_timeout = \"3s\"\nping_interval = \"30s\"\n");
            try
            {
                using (var c = new Cluster(3, "--config", config))
                using (var b = U.Ready(U.Connect(c.AddrList)))
                {
                    long grants = 0;
                    bool stop = false;
                    var outcomes = new Dictionary<string, int>();
                    var first = new Dictionary<string, string>();
                    Action<string, Exception> note = (what, e) =>
                    {
                        lock (outcomes)
                        {
                            int n;
                            outcomes.TryGetValue(what, out n);
                            outcomes[what] = n + 1;
                            if (e != null && !first.ContainsKey(what)) first[what] = e.ToString();
                        }
                    };
                    var workers = Enumerable.Range(0, 8).Select(w => Task.Run(async () =>
                    {
                        for (int i = 0; !Volatile.Read(ref stop); i++)
                        {
                            // A few keys, shared, so that acquires queue too.
                            var key = "planned/" + ((w + i) % 4);
                            using (var cts = new CancellationTokenSource(TimeSpan.FromSeconds(30)))
                            {
                                Ticket t;
                                try { t = await b.AcquireAsync(key, TimeSpan.FromSeconds(5), TimeSpan.FromSeconds(30), TimeSpan.Zero, cts.Token); }
                                catch (NotAcquiredException) { note("acquire: not acquired", null); continue; }
                                catch (Exception e) { note("acquire: " + e.GetType().Name, e); continue; }
                                Interlocked.Increment(ref grants);
                                try { await t.ReleaseAsync(cts.Token); note("granted and released", null); }
                                catch (Exception e) { note("release: " + e.GetType().Name, e); }
                            }
                        }
                    })).ToArray();
                    var all = Task.WhenAll(workers);
                    int leader;
                    try
                    {
                        U.WaitUntil("the load is granted before the restart", () => Interlocked.Read(ref grants) >= 100);
                        leader = c.LeaderIndex();
                        Assert.AreEqual(0, c.Stop(leader), "exit code of the leader n" + (leader + 1) + " after SIGTERM\n" + c.Logs());
                        c.Restart(leader);
                        long atRestart = Interlocked.Read(ref grants);
                        U.WaitUntil("the load is granted after the restart", () => Interlocked.Read(ref grants) >= atRestart + 100);
                    }
                    finally
                    {
                        Volatile.Write(ref stop, true);
                        if (!((IAsyncResult)all).AsyncWaitHandle.WaitOne(U.Patience))
                            Assert.Fail("calls did not return within their deadlines: a silent hang\n" + c.Logs());
                    }
                    lock (outcomes)
                    {
                        Console.WriteLine("csharp planned restart of the leader n" + (leader + 1) + ": " + string.Join(", ", outcomes.Select(kv => kv.Key + "=" + kv.Value)));
                        foreach (var what in outcomes.Keys)
                            Assert.IsTrue(what == "granted and released" || what == "acquire: not acquired",
                                "a planned restart of the leader ended calls with " + what + " (" + outcomes[what] + " times); the first: " +
                                (first.ContainsKey(what) ? first[what] : "?") + "\n" + c.Logs());
                    }
                }
            }
            finally
            {
                File.Delete(config);
            }
        }
    }
}
