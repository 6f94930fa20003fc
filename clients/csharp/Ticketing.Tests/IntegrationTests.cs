using System;
using System.IO;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;

namespace Ticketing.Tests
{
    /// <summary>The client against real ticketd processes built from this repository.</summary>
    [TestFixture]
    public class IntegrationTests
    {
        static readonly TimeSpan S = U.S;

        [Test]
        public void OneNode_AcquireDescribeRelease()
        {
            using (var c = new Cluster(1))
            using (var b = U.Ready(U.Connect(c.AddrList)))
            {
                var t = U.Get(b.AcquireAsync("orders/42", TimeSpan.FromSeconds(5), TimeSpan.FromSeconds(30), TimeSpan.FromSeconds(2)));
                Assert.Greater(t.Token, 0UL);
                Assert.Greater(t.Remaining, TimeSpan.FromSeconds(2));
                Assert.LessOrEqual(t.Remaining, TimeSpan.FromSeconds(30));
                var d = U.Get(b.DescribeAsync("orders/42"));
                Assert.IsTrue(d.Held);
                Assert.AreEqual(t.Token, d.Token);
                Assert.AreEqual(TimeSpan.FromSeconds(30), d.Lease);
                // Held: an immediate attempt is not acquired.
                U.Throws<NotAcquiredException>(() => b.AcquireAsync("orders/42", TimeSpan.Zero, S, TimeSpan.Zero));
                U.Throws<NotHeldException>(() => b.ReleaseTokenAsync("orders/42", t.Token + 1000));
                U.Wait(t.ReleaseAsync());
                Assert.IsFalse(U.Get(b.DescribeAsync("orders/42")).Held);
                U.Throws<NotHeldException>(() => b.ReleaseTokenAsync("orders/42", t.Token));
                var t2 = U.Get(b.AcquireAsync("orders/42", TimeSpan.Zero, S, TimeSpan.Zero));
                Assert.Greater(t2.Token, t.Token);
                U.Wait(b.ReleaseTokenAsync("orders/42", t2.Token)); // by key and token, as another process would
                Assert.IsFalse(U.Get(b.DescribeAsync("orders/42")).Held);
            }
        }

        [Test]
        public void OneNode_ManyTasksOneBrokerTokensIncrease()
        {
            using (var c = new Cluster(1))
            using (var b = U.Ready(U.Connect(c.AddrList)))
            {
                var high = new Dictionary<string, ulong>();
                var errors = new List<string>();
                int grants = 0;
                var workers = Enumerable.Range(0, 16).Select(w => Task.Run(async () =>
                {
                    for (int i = 0; i < 25; i++)
                    {
                        var key = "many/" + ((w + i) % 4);
                        var t = await b.AcquireAsync(key, TimeSpan.FromSeconds(30), TimeSpan.FromSeconds(10), TimeSpan.Zero);
                        lock (high)
                        {
                            ulong h;
                            if (high.TryGetValue(key, out h) && t.Token <= h) errors.Add("token " + t.Token + " for " + key + " not above " + h);
                            high[key] = t.Token;
                            grants++;
                        }
                        await t.ReleaseAsync();
                    }
                })).ToArray();
                U.Wait(Task.WhenAll(workers));
                Assert.AreEqual(16 * 25, grants);
                CollectionAssert.IsEmpty(errors);
            }
        }

        [Test]
        public void OneNode_TokenAuthentication()
        {
            using (var c = new Cluster(1, "--client-token", "good-token"))
            {
                using (var bad = U.Builder(c.AddrList).Token("wrong").Connect())
                {
                    var e = U.Throws<UnauthenticatedException>(() => bad.WaitReadyAsync(TimeSpan.FromMinutes(1)));
                    Assert.AreEqual(ErrorCode.Unauthenticated, e.ServerCode);
                    U.Throws<UnauthenticatedException>(() => bad.AcquireAsync("k", S, S, TimeSpan.Zero));
                }
                using (var good = U.Ready(U.Builder(c.AddrList).Token("good-token").Connect()))
                {
                    var t = U.Get(good.AcquireAsync("k", S, S, TimeSpan.Zero));
                    U.Wait(t.ReleaseAsync());
                }
            }
        }

        /// <summary>token_sha256 of a principal, made by "ticketd hash-token" as docs/deployment.md says.</summary>
        static string HashToken(string token)
        {
            var psi = new ProcessStartInfo(Cluster.Binary(), "hash-token")
            {
                UseShellExecute = false, RedirectStandardInput = true, RedirectStandardOutput = true, RedirectStandardError = true,
            };
            using (var p = Process.Start(psi))
            {
                p.StandardInput.WriteLine(token);
                p.StandardInput.Close();
                var output = p.StandardOutput.ReadToEnd().Trim();
                var err = p.StandardError.ReadToEnd();
                Assert.IsTrue(p.WaitForExit(30000), "ticketd hash-token did not end");
                Assert.AreEqual(0, p.ExitCode, "ticketd hash-token: " + err);
                Assert.AreEqual(64, output.Length, "ticketd hash-token printed " + output);
                return output;
            }
        }

        /// <summary>
        /// A real ticketd with principals ([auth] in ticketd.toml): refusals (F)
        /// are PermissionDeniedException with the server's reason, and the
        /// broker's one connection keeps serving afterwards.
        /// </summary>
        [Test]
        public void OneNode_PrincipalsRefuseWithPermissionDenied()
        {
            var conf = System.IO.Path.GetTempFileName();
            System.IO.File.WriteAllText(conf,
                "[[auth.principals]]\nname = \"orders\"\nrole = \"client\"\nkey_prefixes = [\"orders/\"]\ntoken_sha256 = [\"" + HashToken("orders-token") + "\"]\n\n" +
                "[[auth.principals]]\nname = \"billing\"\nrole = \"client\"\nkey_prefixes = [\"orders/\", \"billing/\"]\ntoken_sha256 = [\"" + HashToken("billing-token") + "\"]\n\n" +
                "[[auth.principals]]\nname = \"watch\"\nrole = \"monitor\"\ntoken_sha256 = [\"" + HashToken("monitor-token") + "\"]\n");
            try
            {
                using (var c = new Cluster(1, "--config", conf))
                using (var mon = U.Ready(U.Builder(c.AddrList).Token("monitor-token").Connect()))
                using (var orders = U.Ready(U.Builder(c.AddrList).Token("orders-token").Connect()))
                using (var billing = U.Ready(U.Builder(c.AddrList).Token("billing-token").Connect()))
                {
                    // A monitor may not take tickets, nor describe keys; its session survives both refusals.
                    var e = U.Throws<PermissionDeniedException>(() => mon.AcquireAsync("orders/1", TimeSpan.Zero, S, TimeSpan.Zero));
                    Assert.AreEqual(PermissionReason.Role, e.Reason, e.Message);
                    Assert.AreEqual(PermissionReason.Role, U.Throws<PermissionDeniedException>(() => mon.DescribeAsync("orders/1")).Reason);
                    Assert.AreEqual(PermissionReason.Role, U.Throws<PermissionDeniedException>(() => mon.AcquireAsync("orders/1", TimeSpan.Zero, S, TimeSpan.Zero)).Reason);

                    // A key outside the principal's prefixes.
                    e = U.Throws<PermissionDeniedException>(() => orders.AcquireAsync("billing/7", S, S, TimeSpan.Zero));
                    Assert.AreEqual(PermissionReason.Key, e.Reason, e.Message);
                    StringAssert.Contains("billing/7", e.Message);
                    StringAssert.Contains("key prefixes", e.Message);
                    Assert.AreEqual(PermissionReason.Key, U.Throws<PermissionDeniedException>(() => orders.DescribeAsync("billing/7")).Reason);
                    Assert.AreEqual(PermissionReason.Key, U.Throws<PermissionDeniedException>(() => orders.ReleaseTokenAsync("billing/7", 1)).Reason);

                    // The same connection serves the next requests; billing may not end orders' ticket (F 3, final).
                    var t = U.Get(orders.AcquireAsync("orders/42", TimeSpan.Zero, TimeSpan.FromSeconds(30), TimeSpan.Zero));
                    var o = U.Throws<PermissionDeniedException>(() => billing.ReleaseTokenAsync("orders/42", t.Token));
                    Assert.AreEqual(PermissionReason.Owner, o.Reason, o.Message);
                    var d = U.Get(orders.DescribeAsync("orders/42"));
                    Assert.IsTrue(d.Held);
                    Assert.AreEqual(t.Token, d.Token);
                    U.Wait(t.ReleaseAsync());
                    Assert.IsFalse(U.Get(orders.DescribeAsync("orders/42")).Held);
                    U.Wait(mon.WaitReadyAsync(S)); // the monitor's session is still up
                }
            }
            finally { System.IO.File.Delete(conf); }
        }

        [Test]
        public void OneNode_CancelWhileQueuedWithdrawsTheWaiter()
        {
            using (var c = new Cluster(1))
            using (var b = U.Ready(U.Connect(c.AddrList)))
            {
                var holder = U.Get(b.AcquireAsync("q", TimeSpan.Zero, TimeSpan.FromSeconds(30), TimeSpan.Zero));
                var cts = new CancellationTokenSource();
                var waiter = b.AcquireAsync("q", TimeSpan.FromSeconds(60), TimeSpan.FromSeconds(30), TimeSpan.Zero, cts.Token);
                U.WaitUntil("the acquire waits in the key's queue", () => U.Get(b.DescribeAsync("q")).Waiters == 1);
                cts.Cancel();
                U.Ended<OperationCanceledException>(waiter);
                U.WaitUntil("the cancel withdrew the waiter", () => U.Get(b.DescribeAsync("q")).Waiters == 0);
                U.Wait(holder.ReleaseAsync());
                Assert.IsFalse(U.Get(b.DescribeAsync("q")).Held, "the withdrawn waiter was granted");
            }
        }

        /// <summary>
        /// Many acquires cancelled at arbitrary moments (before sending, while
        /// queued, while the grant is on its way): none hangs, and every grant
        /// that reached a cancelled caller is released by the client, so that
        /// no key stays held although every lease is 120 s (longer than the test waits).
        /// </summary>
        [Test]
        public void OneNode_CancellationStormLeavesNothingHeld()
        {
            var obs = new U.Observed();
            using (var c = new Cluster(1))
            using (var b = U.Ready(U.Builder(c.AddrList).ReleaseObserver(obs.Report).Connect()))
            {
                var rnd = new Random(7);
                var delays = Enumerable.Range(0, 240).Select(i => rnd.Next(0, 6)).ToArray();
                int granted = 0, cancelled = 0;
                var workers = Enumerable.Range(0, 8).Select(w => Task.Run(async () =>
                {
                    for (int i = 0; i < 30; i++)
                    {
                        using (var cts = new CancellationTokenSource(delays[w * 30 + i]))
                        {
                            try
                            {
                                var t = await b.AcquireAsync("storm/" + (i % 3), TimeSpan.FromSeconds(5), TimeSpan.FromSeconds(120), TimeSpan.Zero, cts.Token);
                                Interlocked.Increment(ref granted);
                                await t.ReleaseAsync();
                            }
                            catch (OperationCanceledException) { Interlocked.Increment(ref cancelled); }
                        }
                    }
                })).ToArray();
                U.Wait(Task.WhenAll(workers));
                Assert.AreEqual(240, granted + cancelled);
                U.WaitUntil("no key stays held (late grants of cancelled acquires are released)", () =>
                    Enumerable.Range(0, 3).All(k => !U.Get(b.DescribeAsync("storm/" + k)).Held));
                lock (obs) Assert.IsTrue(obs.Errors.All(e => e == null), "a compensating release failed: " + obs);
                Console.WriteLine("csharp cancellation storm: granted " + granted + ", cancelled " + cancelled + ", late grants released " + obs.Events.Count);
            }
        }

        [Test]
        public void OneNode_DisposeReleasesAndBrokerCloseDrains()
        {
            var obs = new U.Observed();
            using (var c = new Cluster(1))
            {
                ulong token;
                using (var b = U.Ready(U.Builder(c.AddrList).ReleaseObserver(obs.Report).Connect()))
                {
                    using (var t = U.Get(b.AcquireAsync("d", S, TimeSpan.FromSeconds(30), TimeSpan.Zero)))
                    {
                        token = t.Token;
                    }
                    U.WaitUntil("the background release is reported", () => obs.Has("d/" + token + "/ok"));
                    Assert.IsFalse(U.Get(b.DescribeAsync("d")).Held);
                    var t2 = U.Get(b.AcquireAsync("d2", S, TimeSpan.FromSeconds(30), TimeSpan.Zero));
                    t2.Dispose(); // queued just before the close: the drain lets it finish
                    token = t2.Token;
                }
                Assert.IsTrue(obs.Has("d2/" + token + "/ok"), obs.ToString());
                using (var b = U.Ready(U.Connect(c.AddrList)))
                    Assert.IsFalse(U.Get(b.DescribeAsync("d2")).Held);
            }
        }

        /// <summary>
        /// The documentation's basic example (Example/Program.cs, its await
        /// using in C# 7 form), compiled against the library as CI builds it,
        /// run as its own process against a real server: it gets a ticket and
        /// leaves the key free when it ends.
        /// </summary>
        [Test]
        public void OneNode_DocumentationExampleLeavesNoKeyHeld()
        {
            var exe = Environment.GetEnvironmentVariable("TICKETING_EXAMPLE");
            if (string.IsNullOrEmpty(exe) || !File.Exists(exe))
                Assert.Fail("TICKETING_EXAMPLE must name Example.exe compiled from clients/csharp/Example (clients/csharp/test.sh does); it is \"" + exe + "\"");
            using (var c = new Cluster(1))
            {
                var psi = new ProcessStartInfo("mono", "\"" + exe + "\" " + c.Addrs[0])
                { UseShellExecute = false, RedirectStandardOutput = true, RedirectStandardError = true };
                using (var p = Process.Start(psi))
                {
                    var err = p.StandardError.ReadToEndAsync();
                    var output = p.StandardOutput.ReadToEnd();
                    Assert.IsTrue(p.WaitForExit(U.Patience), "the example did not end");
                    Assert.AreEqual(0, p.ExitCode, "the example failed: " + output + err.Result);
                    StringAssert.StartsWith("token ", output);
                }
                using (var b = U.Ready(U.Connect(c.AddrList)))
                    Assert.IsFalse(U.Get(b.DescribeAsync("key")).Held, "the example left its key held");
            }
        }

        /// <summary>
        /// A grant whose answer is lost (the proxy swallows the G and cuts the
        /// connection) is an IndeterminateException, and the broker, once
        /// reconnected, ends it by its owner (U): the key is free long before
        /// its 250 s lease would end.
        /// </summary>
        [Test]
        public void OneNode_OrphanedGrantIsFreedByReleaseOwner()
        {
            var owners = new U.Observed();
            using (var c = new Cluster(1))
            using (var proxy = new FaultProxy(c.Addrs[0]))
            using (var b = U.Ready(U.Builder(proxy.Addr).OwnerObserverForTests((k, o, e) => owners.Report(k + "/" + VectorTests.ToHex(o), 0, e)).Connect()))
            {
                proxy.SwallowNextGrant();
                var e = U.Throws<IndeterminateException>(() => b.AcquireAsync("orphan", TimeSpan.Zero, TimeSpan.FromSeconds(250), TimeSpan.Zero));
                Assert.Greater(proxy.SwallowedToken, 0UL, "the server did not grant");
                U.WaitUntil("the orphaned grant is released by owner", () => owners.Events.Count > 0);
                Assert.IsTrue(owners.Has("orphan/" + VectorTests.ToHex(e.Owner.ToArray()) + "/0/ok"), "release by owner: " + owners);
                Assert.IsFalse(U.Get(b.DescribeAsync("orphan")).Held);
                var t = U.Get(b.AcquireAsync("orphan", TimeSpan.Zero, S, TimeSpan.Zero));
                Assert.Greater(t.Token, proxy.SwallowedToken);
                U.Wait(t.ReleaseAsync());
            }
        }

        /// <summary>
        /// Three nodes, the leader killed under load: every call ends as a
        /// grant, Indeterminate or a definite error (none hangs), calls succeed
        /// against the new leader, and tokens strictly increase per key.
        /// </summary>
        [Test]
        public void ThreeNodes_LeaderKilledUnderLoad()
        {
            using (var c = new Cluster(3))
            using (var b = U.Ready(U.Connect(c.AddrList)))
            {
                long grants = 0;
                bool stop = false;
                var outcomes = new Dictionary<string, int>();
                var high = new Dictionary<string, ulong>();
                var errors = new List<string>();
                Action<string> note = what => { lock (outcomes) { int n; outcomes.TryGetValue(what, out n); outcomes[what] = n + 1; } };
                var workers = Enumerable.Range(0, 12).Select(w => Task.Run(async () =>
                {
                    for (int i = 0; !Volatile.Read(ref stop); i++)
                    {
                        var key = "fo/" + ((w + i) % 6);
                        using (var cts = new CancellationTokenSource(TimeSpan.FromSeconds(8)))
                        {
                            Ticket t;
                            try { t = await b.AcquireAsync(key, S, TimeSpan.FromSeconds(3), TimeSpan.Zero, cts.Token); }
                            catch (Exception e) { note("acquire: " + KindOf(e)); continue; }
                            Interlocked.Increment(ref grants);
                            lock (high)
                            {
                                ulong h;
                                if (high.TryGetValue(key, out h) && t.Token <= h) errors.Add("token " + t.Token + " for " + key + " not above " + h);
                                high[key] = t.Token;
                            }
                            try { await t.ReleaseAsync(cts.Token); note("granted and released"); }
                            catch (Exception e) { note("release: " + KindOf(e)); }
                        }
                    }
                })).ToArray();
                var all = Task.WhenAll(workers);
                try
                {
                    U.WaitUntil("the load is granted", () => Interlocked.Read(ref grants) >= 50);
                    int leader = c.LeaderIndex();
                    c.Kill(leader);
                    int next = c.LeaderIndex();
                    Assert.AreNotEqual(leader, next, "the killed server still leads");
                    long atKill = Interlocked.Read(ref grants);
                    var sw = Stopwatch.StartNew();
                    while (Interlocked.Read(ref grants) < atKill + 30)
                    {
                        if (sw.ElapsedMilliseconds > U.Patience)
                            lock (outcomes)
                                Assert.Fail("calls did not succeed against the new leader n" + (next + 1) + " (grants " + grants + ", at the kill " + atKill + "); outcomes " +
                                    string.Join(", ", outcomes.Select(kv => kv.Key + "=" + kv.Value)) + "\n" + c.Logs());
                        Thread.Sleep(5);
                    }
                }
                finally
                {
                    Volatile.Write(ref stop, true);
                    if (!((IAsyncResult)all).AsyncWaitHandle.WaitOne(U.Patience))
                        Assert.Fail("calls did not return within their deadlines: a silent hang\n" + c.Logs());
                }
                var fresh = U.Get(b.AcquireAsync("fo/fresh", TimeSpan.Zero, TimeSpan.FromSeconds(5), TimeSpan.Zero));
                U.Wait(fresh.ReleaseAsync());
                CollectionAssert.IsEmpty(errors);
                Assert.IsFalse(all.IsFaulted, all.Exception != null ? all.Exception.ToString() : "");
                var allowed = new HashSet<string> { "granted and released", "acquire: indeterminate", "acquire: not acquired", "acquire: unavailable",
                    "acquire: cancelled", "release: indeterminate", "release: not held", "release: unavailable", "release: cancelled" };
                lock (outcomes)
                {
                    Console.WriteLine("csharp failover: grants " + grants + "; outcomes " + string.Join(", ", outcomes.Select(kv => kv.Key + "=" + kv.Value)));
                    foreach (var what in outcomes.Keys)
                        Assert.IsTrue(allowed.Contains(what), "unexpected outcome " + what);
                }
            }
        }

        static string KindOf(Exception e)
        {
            if (e is IndeterminateException) return "indeterminate";
            if (e is NotAcquiredException) return "not acquired";
            if (e is NotHeldException) return "not held";
            if (e is UnavailableException) return "unavailable";
            if (e is OperationCanceledException) return "cancelled";
            return e.GetType().Name + ": " + e.Message;
        }

        /// <summary>
        /// Single-client acquire+release latency through the C# client (printed,
        /// not asserted: tests never assert timings). When TICKETBENCH_BIN is
        /// set, the Go client's latency is measured against the same server in
        /// the same run (ticketbench -clients 1) and printed next to it.
        /// </summary>
        [Test]
        public void Latency_SingleClientAcquireRelease()
        {
            using (var c = new Cluster(1))
            using (var b = U.Ready(U.Connect(c.AddrList)))
            {
                for (int i = 0; i < 50; i++) U.Wait(U.Get(b.AcquireAsync("lat", S, TimeSpan.FromSeconds(30), TimeSpan.Zero)).ReleaseAsync()); // warm-up
                const int n = 300;
                var each = new double[n];
                var total = Stopwatch.StartNew();
                for (int i = 0; i < n; i++)
                {
                    var sw = Stopwatch.StartNew();
                    var t = b.AcquireAsync("lat", S, TimeSpan.FromSeconds(30), TimeSpan.Zero).GetAwaiter().GetResult();
                    t.ReleaseAsync().GetAwaiter().GetResult();
                    each[i] = sw.Elapsed.TotalMilliseconds;
                }
                total.Stop();
                Array.Sort(each);
                Console.WriteLine("csharp latency: acquire+release, 1 client, 1 node: mean {0:F3} ms, p50 {1:F3} ms, p99 {2:F3} ms over {3} pairs",
                    total.Elapsed.TotalMilliseconds / n, each[n / 2], each[n * 99 / 100], n);
                var bench = Environment.GetEnvironmentVariable("TICKETBENCH_BIN");
                if (!string.IsNullOrEmpty(bench))
                {
                    var psi = new ProcessStartInfo(bench, "-addr " + c.AddrList + " -workload uncontended -clients 1 -per-conn 1 -duration 3s -warmup 500ms -q")
                    { UseShellExecute = false, RedirectStandardOutput = true, RedirectStandardError = true };
                    using (var p = Process.Start(psi))
                    {
                        var err = p.StandardError.ReadToEndAsync();
                        var outp = p.StandardOutput.ReadToEnd();
                        Assert.IsTrue(p.WaitForExit(U.Patience), "ticketbench did not finish");
                        Console.WriteLine("go latency (ticketbench, same server): " + (outp + err.Result).Trim().Replace("\n", " | "));
                        Assert.AreEqual(0, p.ExitCode, "ticketbench failed: " + outp + err.Result);
                    }
                }
            }
        }
    }
}
