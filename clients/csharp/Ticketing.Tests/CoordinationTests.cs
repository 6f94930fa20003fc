using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Linq;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;
using Ticketing.Coordination;
using Ticketing.Wire;

namespace Ticketing.Tests
{
    /// <summary>The coordination client against real ticketd processes.</summary>
    [TestFixture]
    public class CoordinationTests
    {
        static SessionOptions Opts(TimeSpan timeout, BlockingCollection<SessionState> states = null)
        {
            var o = new SessionOptions { Timeout = timeout, Description = "csharp test" };
            if (states != null) o.StateChanged = st => states.Add(st);
            return o;
        }

        static void Expect(BlockingCollection<SessionState> states, SessionState want)
        {
            SessionState got;
            while (states.TryTake(out got, U.Patience))
                if (got == want) return;
            Assert.Fail("the session never reported " + want);
        }

        [Test]
        public void NodesSemaphoresAndWatches()
        {
            using (var c = new Cluster(1))
            using (var b = U.Ready(U.Connect(c.AddrList)))
            {
                var cc = new CoordinationClient(b);
                U.Wait(cc.CreateNodeAsync("/t", new NodeSettings { SessionGracePeriod = TimeSpan.FromSeconds(5) }));
                var e = U.Throws<CoordinationException>(() => cc.CreateNodeAsync("/t"));
                Assert.AreEqual(CoordinationStatus.AlreadyExists, e.Status);
                Assert.AreEqual(TimeSpan.FromSeconds(5), U.Get(cc.DescribeNodeAsync("/t")).Settings.SessionGracePeriod);

                var s1 = U.Get(cc.StartSessionAsync("/t", Opts(TimeSpan.FromSeconds(10))));
                var s2 = U.Get(cc.StartSessionAsync("/t", Opts(TimeSpan.FromSeconds(10))));
                Assert.AreNotEqual(s1.Id, s2.Id);
                Assert.AreEqual(SessionState.Attached, s1.State);
                U.Wait(s1.CreateSemaphoreAsync("pool", 2, Encoding.UTF8.GetBytes("v1")));
                Assert.AreEqual(CoordinationStatus.AlreadyExists, U.Throws<CoordinationException>(() => s2.CreateSemaphoreAsync("pool", 2)).Status);

                var a = U.Get(s1.AcquireSemaphoreAsync("pool"));
                var x = U.Get(s2.AcquireSemaphoreAsync("pool", new AcquireOptions { Data = Encoding.UTF8.GetBytes("s2") }));
                Assert.Greater(x.Token, a.Token);
                Assert.IsTrue(a.IsValid);
                Assert.IsFalse(a.LostToken.IsCancellationRequested);
                // Full: an exclusive try-once is refused; a timed one waits in the queue and times out.
                // An ephemeral semaphore lives while held.
                var eph = U.Get(s1.AcquireSemaphoreAsync("eph", new AcquireOptions { Ephemeral = true, Timeout = TimeSpan.Zero }));
                Assert.IsTrue(U.Get(s2.DescribeSemaphoreAsync("eph")).Ephemeral);
                U.Wait(eph.ReleaseAsync());
                Assert.AreEqual(CoordinationStatus.NotFound, U.Throws<CoordinationException>(() => s2.DescribeSemaphoreAsync("eph")).Status);
                var s3 = U.Get(cc.StartSessionAsync("/t", Opts(TimeSpan.FromSeconds(10))));
                var listed = U.Get(cc.ListSessionsAsync("/t"));
                CollectionAssert.AreEqual(new[] { s1.Id, s2.Id, s3.Id }, listed.Select(i => i.Id).ToArray());
                Assert.IsTrue(listed.All(i => i.Attached && i.Description == "csharp test" && i.Timeout == TimeSpan.FromSeconds(10)));
                U.Throws<SemaphoreNotAcquiredException>(() => s3.AcquireSemaphoreAsync("pool", new AcquireOptions { Timeout = TimeSpan.Zero }));
                ulong queuedAs = 0;
                var waiting = s3.AcquireSemaphoreAsync("pool", new AcquireOptions { Exclusive = true, Queued = id => queuedAs = id });

                // The waiter shows up in the queue; the owners with their data.
                SemaphoreDescription d;
                for (;;)
                {
                    d = U.Get(s1.DescribeSemaphoreAsync("pool", new DescribeOptions { Owners = true, Waiters = true }));
                    if (d.Waiters.Count == 1) break;
                }
                Assert.AreEqual(2UL, d.Limit);
                Assert.AreEqual(2UL, d.Count);
                Assert.AreEqual("v1", Encoding.UTF8.GetString(d.GetData()));
                CollectionAssert.AreEqual(new[] { a.Token, x.Token }, d.Owners.Select(o => o.OrderId).ToArray());
                Assert.AreEqual("s2", Encoding.UTF8.GetString(d.Owners[1].GetData()));
                Assert.AreEqual(s3.Id, d.Waiters[0].Session);
                Assert.IsTrue(d.Waiters[0].Forever);

                // A one-shot watch fires on a data change made by another session.
                d = U.Get(s1.DescribeSemaphoreAsync("pool", new DescribeOptions { WatchData = true }));
                Assert.IsFalse(d.Changed.IsCompleted);
                U.Wait(s2.UpdateSemaphoreAsync("pool", Encoding.UTF8.GetBytes("v2")));
                var change = U.Get(d.Changed);
                Assert.IsTrue(change.DataChanged);

                // The watcher: the first NextAsync is now, the next after a change of owners.
                var w = s2.WatchSemaphore("pool", new DescribeOptions { Owners = true, WatchOwners = true });
                Assert.AreEqual(2, U.Get(w.NextAsync()).Owners.Count);
                var next = w.NextAsync();
                U.Wait(a.ReleaseAsync());
                Assert.IsTrue(a.LostToken.IsCancellationRequested, "a released lease's token fires");
                Assert.IsFalse(a.IsValid);
                Assert.AreEqual(1, U.Get(next).Owners.Count);

                U.Wait(x.DisposeAsync().AsTask());
                var ex = U.Get(waiting);
                Assert.AreEqual(2UL, ex.Count, "exclusive holds the limit");
                Assert.AreEqual(ex.Token, queuedAs, "the Queued callback got the waiter's order id");

                // Delete in use: refused; with force the owner's lease is lost.
                Assert.AreEqual(CoordinationStatus.PreconditionFailed, U.Throws<CoordinationException>(() => s1.DeleteSemaphoreAsync("pool")).Status);
                U.Wait(s1.DeleteSemaphoreAsync("pool", true));
                U.WaitUntil("the force-deleted hold's token fires", () => ex.LostToken.IsCancellationRequested);
                Assert.IsInstanceOf<LeaseLostException>(ex.LossReason);
                Assert.AreEqual(CoordinationStatus.NotFound, U.Throws<CoordinationException>(() => s1.DescribeSemaphoreAsync("pool")).Status);

                // Closing a session releases its holds and fires its tokens.
                U.Wait(s1.CreateSemaphoreAsync("one", 1));
                var h = U.Get(s1.AcquireSemaphoreAsync("one"));
                U.Wait(s1.CloseAsync());
                Assert.AreEqual(SessionState.Expired, s1.State);
                Assert.IsTrue(h.LostToken.IsCancellationRequested);
                Assert.IsInstanceOf<ClosedException>(h.LossReason);
                U.Get(s2.AcquireSemaphoreAsync("one", new AcquireOptions { Timeout = TimeSpan.FromSeconds(20) }));
                U.Throws<ClosedException>(() => s1.AcquireSemaphoreAsync("one"));

                U.Wait(cc.DisposeAsync().AsTask());
                U.Wait(cc.DropNodeAsync("/t"));
                Assert.AreEqual(CoordinationStatus.NotFound, U.Throws<CoordinationException>(() => cc.DescribeNodeAsync("/t")).Status);
            }
        }

        [Test]
        public void SessionsShareTheBrokersConnection()
        {
            using (var c = new Cluster(1))
            using (var b = U.Ready(U.Connect(c.AddrList)))
            {
                var cc = new CoordinationClient(b);
                U.Wait(cc.CreateNodeAsync("/shared"));
                var ss = Enumerable.Range(0, 5).Select(_ => U.Get(cc.StartSessionAsync("/shared", Opts(TimeSpan.FromSeconds(5))))).ToList();
                var conn = b.CurrentForTests;
                Assert.IsTrue(conn.Sessions, "the server announces many sessions per connection");
                foreach (var s in ss)
                {
                    var l = s.A.CurrentLinkForTests;
                    Assert.IsTrue(l.Shared);
                    Assert.AreSame(conn, l.Conn, "every session rides on the broker's one connection");
                }
                // Tickets go on beside them.
                var t = U.Get(b.AcquireAsync("k", TimeSpan.Zero, TimeSpan.FromSeconds(5), TimeSpan.Zero));
                U.Wait(t.ReleaseAsync());
                U.Wait(cc.DisposeAsync().AsTask());
            }
        }

        /// <summary>
        /// An acquire of a semaphore the session already holds that is
        /// cancelled before its answer is withdrawn with a release, which
        /// gives up the whole hold: the lease the session had ends with it
        /// (LeaseLostException) before another session can be granted the
        /// semaphore, never left looking valid. The cancel races with the
        /// answer (an answer already there is the same hold), so the test
        /// repeats until the cancel wins.
        /// </summary>
        [Test]
        public void ACancelledReacquireEndsTheHold()
        {
            using (var c = new Cluster(1))
            using (var b = U.Ready(U.Connect(c.AddrList)))
            {
                var cc = new CoordinationClient(b);
                U.Wait(cc.CreateNodeAsync("/reacquire"));
                var a = U.Get(cc.StartSessionAsync("/reacquire", Opts(TimeSpan.FromSeconds(10))));
                var o = U.Get(cc.StartSessionAsync("/reacquire", Opts(TimeSpan.FromSeconds(10))));
                U.Wait(a.CreateSemaphoreAsync("r", 1));
                bool withdrawn = false;
                for (int round = 0; round < 500 && !withdrawn; round++)
                {
                    var held = U.Get(a.AcquireSemaphoreAsync("r"));
                    var cts = new CancellationTokenSource();
                    var again = a.AcquireSemaphoreAsync("r", null, cts.Token);
                    cts.Cancel();
                    try
                    {
                        Assert.AreSame(held, again.GetAwaiter().GetResult(), "an answered re-acquire is the same hold");
                        U.Wait(held.ReleaseAsync());
                        continue;
                    }
                    catch (OperationCanceledException)
                    {
                        withdrawn = true;
                    }
                    var other = U.Get(o.AcquireSemaphoreAsync("r", new AcquireOptions { Timeout = TimeSpan.FromSeconds(10) }));
                    Assert.IsFalse(held.IsValid, "a's lease still looks valid while o holds the semaphore");
                    Assert.IsInstanceOf<LeaseLostException>(held.LossReason);
                    U.Wait(other.ReleaseAsync());
                }
                Assert.IsTrue(withdrawn, "the cancel never came before the re-acquire's answer in 500 rounds");
                U.Wait(cc.DisposeAsync().AsTask());
            }
        }

        [Test]
        public void ABlockedCallbackHoldsUpNoOtherSessionOnTheConnection()
        {
            using (var c = new Cluster(1))
            using (var b = U.Ready(U.Connect(c.AddrList)))
            {
                var cc = new CoordinationClient(b);
                U.Wait(cc.CreateNodeAsync("/callbacks"));
                var holder = U.Get(cc.StartSessionAsync("/callbacks", Opts(TimeSpan.FromSeconds(5))));
                var waiter = U.Get(cc.StartSessionAsync("/callbacks", Opts(TimeSpan.FromSeconds(5))));
                var bystander = U.Get(cc.StartSessionAsync("/callbacks", Opts(TimeSpan.FromSeconds(5))));
                U.Wait(holder.CreateSemaphoreAsync("m", 1));
                var held = U.Get(holder.AcquireSemaphoreAsync("m"));
                var inCallback = new ManualResetEventSlim();
                var unblock = new ManualResetEventSlim();
                var waiting = waiter.AcquireSemaphoreAsync("m", new AcquireOptions { Queued = _ => { inCallback.Set(); unblock.Wait(); } });
                Assert.IsTrue(inCallback.Wait(U.Patience), "the Queued callback never ran");
                // The callback blocks: the other sessions on the connection go on (answers, and the release's).
                U.Wait(bystander.CreateSemaphoreAsync("other", 3));
                Assert.AreEqual(3UL, U.Get(bystander.DescribeSemaphoreAsync("other")).Limit);
                U.Wait(held.ReleaseAsync());
                Assert.IsFalse(waiting.IsCompleted, "the acquire returned before its Queued callback did");
                unblock.Set();
                Assert.Greater(U.Get(waiting).Token, held.Token);
                U.Wait(cc.DisposeAsync().AsTask());
            }
        }

        [Test]
        public void OlderServerGetsAConnectionPerSession()
        {
            using (var c = new Cluster(1))
            using (var p = new FaultProxy(c.Addrs[0]))
            {
                p.HideSessions();
                using (var b = U.Ready(U.Connect(p.Addr)))
                {
                    var conn = b.CurrentForTests;
                    Assert.IsFalse(conn.Sessions);
                    var cc = new CoordinationClient(b);
                    U.Wait(cc.CreateNodeAsync("/old"));
                    var s1 = U.Get(cc.StartSessionAsync("/old", Opts(TimeSpan.FromSeconds(5))));
                    var s2 = U.Get(cc.StartSessionAsync("/old", Opts(TimeSpan.FromSeconds(5))));
                    var l1 = s1.A.CurrentLinkForTests;
                    var l2 = s2.A.CurrentLinkForTests;
                    Assert.IsFalse(l1.Shared);
                    Assert.AreNotSame(conn, l1.Conn);
                    Assert.AreNotSame(l1.Conn, l2.Conn, "a connection per session");
                    U.Wait(s1.CreateSemaphoreAsync("m", 1));
                    var le = U.Get(s1.AcquireSemaphoreAsync("m"));
                    U.Throws<SemaphoreNotAcquiredException>(() => s2.AcquireSemaphoreAsync("m", new AcquireOptions { Timeout = TimeSpan.Zero }));
                    U.Wait(le.ReleaseAsync());
                    U.Get(s2.AcquireSemaphoreAsync("m", new AcquireOptions { Timeout = TimeSpan.Zero }));
                    U.Wait(s1.CloseAsync());
                    Assert.IsTrue(l1.Conn.Dead, "a stopped session's own connection is closed");
                    // Closing the broker closes the connections of the sessions' own, and ends them.
                    U.Wait(b.DisposeAsync().AsTask());
                    U.WaitUntil("the session's own connection closed with the broker", () => l2.Conn.Dead);
                    U.WaitUntil("the session ended with the broker", () => s2.State == SessionState.Expired);
                    U.Throws<ClosedException>(() => s2.DescribeSemaphoreAsync("m"));
                }
            }
        }

        [Test]
        public void LargeRequestsTakeTheConnectionsOneLargeSlot()
        {
            using (var c = new Cluster(1))
            using (var b = U.Ready(U.Connect(c.AddrList)))
            {
                var cc = new CoordinationClient(b);
                U.Wait(cc.CreateNodeAsync("/large"));
                var ss = Enumerable.Range(0, 4).Select(_ => U.Get(cc.StartSessionAsync("/large", Opts(TimeSpan.FromSeconds(10))))).ToList();
                var big = new byte[600 << 10];
                for (int i = 0; i < big.Length; i++) big[i] = (byte)i;
                U.Wait(ss[0].CreateSemaphoreAsync("big", 1));
                // Many sessions write large data at once; a small request goes beside them.
                var writes = ss.SelectMany(s => Enumerable.Range(0, 3).Select(_ => s.UpdateSemaphoreAsync("big", big))).ToArray();
                U.Wait(ss[0].CreateSemaphoreAsync("small", 1));
                U.Wait(Task.WhenAll(writes));
                Assert.AreEqual(1, b.CurrentForTests.LargeHeldMax, "large requests on their way at once");
                // An answer longer than a ticket frame is read whole.
                CollectionAssert.AreEqual(big, U.Get(ss[1].DescribeSemaphoreAsync("big")).GetData());
                U.Wait(cc.DisposeAsync().AsTask());
            }
        }

        [Test]
        public void SemaphoreNeverOverItsLimitAsTheHoldersSeeIt()
        {
            const int sessions = 8, rounds = 15, limit = 2;
            using (var c = new Cluster(1))
            using (var b = U.Ready(U.Connect(c.AddrList)))
            {
                var cc = new CoordinationClient(b);
                U.Wait(cc.CreateNodeAsync("/limit"));
                var ss = Enumerable.Range(0, sessions).Select(_ => U.Get(cc.StartSessionAsync("/limit", Opts(TimeSpan.FromSeconds(5))))).ToList();
                U.Wait(ss[0].CreateSemaphoreAsync("sem", limit));
                int inside = 0, most = 0, done = 0;
                var holders = new HashSet<ulong>();
                var work = ss.Select(s => Task.Run(async () =>
                {
                    for (int i = 0; i < rounds; i++)
                    {
                        var le = await s.AcquireSemaphoreAsync("sem");
                        if (le.IsValid)
                        {
                            int n = Interlocked.Increment(ref inside);
                            lock (holders) { Assert.IsTrue(holders.Add(le.Token), "a fencing token handed out twice"); most = Math.Max(most, n); }
                            await Task.Yield();
                            Interlocked.Decrement(ref inside);
                        }
                        await le.ReleaseAsync();
                        Interlocked.Increment(ref done);
                    }
                })).ToArray();
                Assert.IsTrue(Task.WaitAll(work, U.Patience * 2), "the holders did not finish: a hang");
                Assert.AreEqual(sessions * rounds, done);
                Assert.LessOrEqual(most, limit, "more holders than the limit at once");
                Assert.AreEqual(sessions * rounds, holders.Count);
                U.Wait(cc.DisposeAsync().AsTask());
            }
        }

        [Test]
        public void LeaderKillWithManySessionsOnOneConnectionNeverOverTheLimit()
        {
            const int sessions = 50, limit = 3;
            using (var c = new Cluster(3))
            using (var b = U.Ready(U.Connect(c.AddrList)))
            {
                var cc = new CoordinationClient(b);
                U.Wait(cc.CreateNodeAsync("/kill"));
                var ss = Enumerable.Range(0, sessions).Select(_ => U.Get(cc.StartSessionAsync("/kill", Opts(TimeSpan.FromSeconds(5))))).ToList();
                U.Wait(ss[0].CreateSemaphoreAsync("sem", limit));
                int inside = 0, most = 0, rounds = 0, roundsAfterKill = 0, killed = 0;
                var stop = new CancellationTokenSource();
                var work = ss.Select(s => Task.Run(async () =>
                {
                    while (!stop.IsCancellationRequested)
                    {
                        SemaphoreLease le;
                        try { le = await s.AcquireSemaphoreAsync("sem", new AcquireOptions { Timeout = TimeSpan.FromSeconds(2) }); }
                        catch (SemaphoreNotAcquiredException) { continue; }
                        catch (IndeterminateException) { continue; }
                        catch (DeadlinePassedException) { continue; }
                        // Inside while the holder sees the lease valid: until its work ends or its lost token fires.
                        if (le.IsValid)
                        {
                            int left = 0;
                            Action leave = () => { if (Interlocked.Exchange(ref left, 1) == 0) Interlocked.Decrement(ref inside); };
                            int n = Interlocked.Increment(ref inside);
                            using (le.LostToken.Register(leave))
                            {
                                lock (ss) most = Math.Max(most, n);
                                await Task.Delay(5);
                                leave();
                            }
                        }
                        try { await le.ReleaseAsync(); } catch (TicketingException) { }
                        Interlocked.Increment(ref rounds);
                        if (Volatile.Read(ref killed) == 1) Interlocked.Increment(ref roundsAfterKill);
                    }
                })).ToArray();
                U.WaitUntil("rounds before the kill", () => Volatile.Read(ref rounds) >= 50);
                c.Kill(c.LeaderIndex());
                Volatile.Write(ref killed, 1);
                U.WaitUntil("rounds after the leader kill", () => Volatile.Read(ref roundsAfterKill) >= 50);
                stop.Cancel();
                Assert.IsTrue(Task.WaitAll(work, U.Patience), "the holders did not stop: a hang");
                Assert.LessOrEqual(most, limit, "more holders than the limit at once, as the holders saw it");
                Assert.IsTrue(ss.All(s => s.State != SessionState.Expired), "a session expired across the leader change");
                U.Wait(cc.DisposeAsync().AsTask());
            }
        }

        [Test]
        public void NodeCallsWithoutATokenEndWithinTheOperationTimeout()
        {
            using (var c = new Cluster(1))
            using (var p = new FaultProxy(c.Addrs[0]))
            using (var b = U.Ready(U.Builder(p.Addr).OperationTimeout(TimeSpan.FromMilliseconds(500)).Connect()))
            {
                var cc = new CoordinationClient(b);
                U.Wait(cc.CreateNodeAsync("/bounded"));
                p.BlackHole();
                U.Throws<UnavailableException>(() => cc.DescribeNodeAsync("/bounded"));
                U.Throws<IndeterminateException>(() => cc.CreateNodeAsync("/other"));
            }
        }

        [Test]
        public void CutConnectionRestoresTheSessionWithItsHold()
        {
            using (var c = new Cluster(1))
            using (var p = new FaultProxy(c.Addrs[0]))
            using (var b = U.Ready(U.Connect(p.Addr)))
            {
                var cc = new CoordinationClient(b);
                U.Wait(cc.CreateNodeAsync("/restore"));
                var states = new BlockingCollection<SessionState>();
                var s = U.Get(cc.StartSessionAsync("/restore", Opts(TimeSpan.FromSeconds(20), states)));
                Expect(states, SessionState.Attached);
                U.Wait(s.CreateSemaphoreAsync("m", 1));
                var le = U.Get(s.AcquireSemaphoreAsync("m"));
                var id = s.Id;
                p.CutAll();
                Expect(states, SessionState.Detached);
                Expect(states, SessionState.Attached);
                Assert.AreEqual(id, s.Id);
                // Restored well before its deadline: the hold stands, on the server too.
                Assert.IsTrue(le.IsValid);
                var d = U.Get(s.DescribeSemaphoreAsync("m", new DescribeOptions { Owners = true }));
                Assert.AreEqual(1, d.Owners.Count);
                Assert.AreEqual(id, d.Owners[0].Session);
                Assert.AreEqual(le.Token, d.Owners[0].OrderId);
                var again = U.Get(s.AcquireSemaphoreAsync("m", new AcquireOptions { Timeout = TimeSpan.Zero }));
                Assert.AreEqual(le.Token, again.Token, "the same hold, answered again");
                U.Wait(cc.DisposeAsync().AsTask());
            }
        }

        [Test]
        public void BlackHoledSessionsLeaseIsLostBeforeAnotherSessionIsGranted()
        {
            using (var c = new Cluster(1))
            using (var p = new FaultProxy(c.Addrs[0]))
            using (var bp = U.Ready(U.Connect(p.Addr)))
            using (var b = U.Ready(U.Connect(c.AddrList)))
            {
                var cut = new CoordinationClient(bp);
                var other = new CoordinationClient(b);
                U.Wait(other.CreateNodeAsync("/bh", new NodeSettings { SessionGracePeriod = TimeSpan.FromSeconds(2), SelfCheckPeriod = TimeSpan.FromMilliseconds(200) }));
                var s = U.Get(cut.StartSessionAsync("/bh", Opts(TimeSpan.FromSeconds(2))));
                U.Wait(s.CreateSemaphoreAsync("m", 1));
                var le = U.Get(s.AcquireSemaphoreAsync("m"));
                long lostAt = 0, grantedAt = 0, order = 0;
                le.LostToken.Register(() => Interlocked.Exchange(ref lostAt, Interlocked.Increment(ref order)));
                var s2 = U.Get(other.StartSessionAsync("/bh", Opts(TimeSpan.FromSeconds(10))));
                var waiting = s2.AcquireSemaphoreAsync("m").ContinueWith(t => { Interlocked.Exchange(ref grantedAt, Interlocked.Increment(ref order)); return t.Result; });
                p.BlackHole();
                var won = U.Get(waiting);
                Assert.Greater(won.Token, le.Token);
                Assert.AreNotEqual(0, Interlocked.Read(ref lostAt), "the lease's lost token never fired");
                Assert.Less(Interlocked.Read(ref lostAt), Interlocked.Read(ref grantedAt), "another session was granted before the lease's lost token fired");
                Assert.IsFalse(le.IsValid);
                Assert.IsInstanceOf<DeadlinePassedException>(le.LossReason);
                U.Wait(other.DisposeAsync().AsTask());
            }
        }

        [Test]
        public void LeaseIsLostBeforeAnotherSessionIsGrantedWhenTheLeaderIsKilled()
        {
            using (var c = new Cluster(3))
            {
                // The holder reaches every server through a proxy of its own;
                // the other session's client reaches them directly.
                var proxies = c.Addrs.Select(a => new FaultProxy(a)).ToList();
                try
                {
                    using (var bp = U.Ready(U.Connect(string.Join(",", proxies.Select(p => p.Addr)))))
                    using (var b = U.Ready(U.Connect(c.AddrList)))
                    {
                        var holder = new CoordinationClient(bp);
                        var other = new CoordinationClient(b);
                        U.Wait(other.CreateNodeAsync("/failover", new NodeSettings { SessionGracePeriod = TimeSpan.FromSeconds(2), SelfCheckPeriod = TimeSpan.FromMilliseconds(200) }));
                        var s = U.Get(holder.StartSessionAsync("/failover", Opts(TimeSpan.FromSeconds(2))));
                        U.Wait(s.CreateSemaphoreAsync("m", 1));
                        var le = U.Get(s.AcquireSemaphoreAsync("m"));
                        long lostAt = 0, grantedAt = 0, order = 0;
                        le.LostToken.Register(() => Interlocked.Exchange(ref lostAt, Interlocked.Increment(ref order)));
                        var s2 = U.Get(other.StartSessionAsync("/failover", Opts(TimeSpan.FromSeconds(10))));
                        var waiting = s2.AcquireSemaphoreAsync("m").ContinueWith(t => { Interlocked.Exchange(ref grantedAt, Interlocked.Increment(ref order)); return t.Result; });
                        // The leader dies and the holder can reach no server to
                        // restore its session: the new leader expires it, and
                        // only then grants the waiting session.
                        foreach (var p in proxies) p.BlackHole();
                        c.Kill(c.LeaderIndex());
                        var won = U.Get(waiting);
                        Assert.Greater(won.Token, le.Token);
                        Assert.AreNotEqual(0, Interlocked.Read(ref lostAt), "the lease's lost token never fired");
                        Assert.Less(Interlocked.Read(ref lostAt), Interlocked.Read(ref grantedAt), "another session was granted before the lease's lost token fired");
                        Assert.IsFalse(le.IsValid);
                        Assert.IsInstanceOf<DeadlinePassedException>(le.LossReason);
                        U.Wait(other.DisposeAsync().AsTask());
                    }
                }
                finally
                {
                    foreach (var p in proxies) p.Dispose();
                }
            }
        }

        [Test]
        public void ALeaseKnowsWhyBeforeItsLostTokenFires()
        {
            using (var c = new Cluster(1))
            using (var p = new FaultProxy(c.Addrs[0]))
            using (var b = U.Ready(U.Connect(p.Addr)))
            {
                var cc = new CoordinationClient(b);
                U.Wait(cc.CreateNodeAsync("/why"));
                var s = U.Get(cc.StartSessionAsync("/why", Opts(TimeSpan.FromSeconds(2))));
                U.Wait(s.CreateSemaphoreAsync("a", 1));
                U.Wait(s.CreateSemaphoreAsync("b", 1));
                // A handler woken by the token reads the reason on the spot.
                var seen = new BlockingCollection<Exception>();
                Exception why;
                var s2 = U.Get(cc.StartSessionAsync("/why", Opts(TimeSpan.FromSeconds(10))));
                var atClose = U.Get(s2.AcquireSemaphoreAsync("b"));
                atClose.LostToken.Register(() => seen.Add(atClose.LossReason ?? new Exception("no reason yet")));
                U.Wait(s2.CloseAsync());
                Assert.IsTrue(seen.TryTake(out why, U.Patience), "the lost token never fired");
                Assert.IsInstanceOf<ClosedException>(why);

                var atDeadline = U.Get(s.AcquireSemaphoreAsync("a"));
                atDeadline.LostToken.Register(() => seen.Add(atDeadline.LossReason ?? new Exception("no reason yet")));
                p.BlackHole();
                Assert.IsTrue(seen.TryTake(out why, U.Patience), "the lost token never fired");
                Assert.IsInstanceOf<DeadlinePassedException>(why);
            }
        }

        [Test]
        public void ADeadlineTimerThatRunsEarlyRunsAgain()
        {
            using (var c = new Cluster(1))
            using (var p = new FaultProxy(c.Addrs[0]))
            using (var b = U.Ready(U.Connect(p.Addr)))
            {
                var cc = new CoordinationClient(b);
                U.Wait(cc.CreateNodeAsync("/early"));
                var s = U.Get(cc.StartSessionAsync("/early", Opts(TimeSpan.FromSeconds(2))));
                U.Wait(s.CreateSemaphoreAsync("m", 1));
                var le = U.Get(s.AcquireSemaphoreAsync("m"));
                p.BlackHole();
                // Timers keep their own clock: one that runs before the
                // deadline by the Stopwatch must not leave the holds to outlive it.
                s.A.DeadlineTimerRanEarlyForTests();
                var fired = new ManualResetEventSlim();
                le.LostToken.Register(fired.Set);
                Assert.IsTrue(fired.Wait(U.Patience), "the lease's lost token never fired after the deadline");
                Assert.IsInstanceOf<DeadlinePassedException>(le.LossReason);
            }
        }

        [Test]
        public void RecipesRefuseSemaphoresOfAnotherKind()
        {
            using (var c = new Cluster(1))
            using (var b = U.Ready(U.Connect(c.AddrList)))
            {
                var cc = new CoordinationClient(b);
                U.Wait(cc.CreateNodeAsync("/kinds"));
                var s = U.Get(cc.StartSessionAsync("/kinds"));
                // Made by hand under the recipes' names, with other limits or data.
                U.Wait(s.CreateSemaphoreAsync("recipe/discovery/api", 1, Encoding.UTF8.GetBytes("ticketing-recipe:discovery")));
                U.Wait(s.CreateSemaphoreAsync("recipe/publication/limits", 1, Encoding.UTF8.GetBytes("ticketing-recipe:publicationX")));
                U.Wait(s.CreateSemaphoreAsync("recipe/election/e", 2, Encoding.UTF8.GetBytes("ticketing-recipe:election")));
                U.Throws<WrongKindException>(() => s.Discovery("api").RegisterAsync(Encoding.UTF8.GetBytes("x")));
                U.Throws<WrongKindException>(() => s.Discovery("api").ListAsync());
                U.Throws<WrongKindException>(() => s.Discovery("api").Watch().NextAsync());
                U.Throws<WrongKindException>(() => s.Publication("limits").PublishAsync(new byte[0]));
                U.Throws<WrongKindException>(() => s.Publication("limits").GetAsync());
                U.Throws<WrongKindException>(() => s.Election("e").Observe().NextAsync());
                Assert.AreEqual(0, U.Get(s.DescribeSemaphoreAsync("recipe/discovery/api", new DescribeOptions { Owners = true })).Owners.Count, "registered on a semaphore of another kind");
                // An empty value is a value, told from none.
                var p = s.Publication("empty");
                U.Throws<NotFoundException>(() => p.GetAsync());
                U.Wait(p.PublishAsync(new byte[0]));
                Assert.AreEqual(0, U.Get(p.GetAsync()).Length);
                Assert.IsNotNull(U.Get(p.Watch().NextAsync()), "an empty value is not unset");
                U.Wait(cc.DisposeAsync().AsTask());
            }
        }

        [Test]
        public void OnlyAnswersThatFollowACommitMoveTheDeadline()
        {
            using (var c = new Cluster(1))
            using (var b = U.Ready(U.Connect(c.AddrList)))
            {
                var cc = new CoordinationClient(b);
                U.Wait(cc.CreateNodeAsync("/deadline"));
                // A long timeout: no keep-alive runs during the test (the first after a sixth of it).
                var s = U.Get(cc.StartSessionAsync("/deadline", Opts(TimeSpan.FromMinutes(5))));
                long attach = s.A.ConfirmedTicks;
                Assert.AreNotEqual(0, attach, "the attach's answer confirms the session");
                // BAD_REQUEST (a limit of 0, refused before any commit): the deadline stays.
                var e = U.Throws<CoordinationException>(() => s.A.DoAsync("create", CoordOp.CreateSemaphore,
                    new CoordBody { Name = Encoding.UTF8.GetBytes("zero"), Limit = 0 }, false, null, null, null, CancellationToken.None));
                Assert.AreEqual(CoordinationStatus.BadRequest, e.Status);
                Assert.AreEqual(attach, s.A.ConfirmedTicks, "a BAD_REQUEST moved the session's deadline");
                // NOT_FOUND follows a commit: it moves the deadline.
                Assert.AreEqual(CoordinationStatus.NotFound, U.Throws<CoordinationException>(() => s.DescribeSemaphoreAsync("missing")).Status);
                long afterRead = s.A.ConfirmedTicks;
                Assert.Greater(afterRead, attach);
                U.Wait(s.CreateSemaphoreAsync("fine", 1));
                Assert.Greater(s.A.ConfirmedTicks, afterRead);
                U.Wait(cc.DisposeAsync().AsTask());
            }
        }
    }
}
