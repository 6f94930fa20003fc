using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;
using Ticketing.Wire;

namespace Ticketing.Tests
{
    /// <summary>
    /// No call can wait forever: the broker-wide operation timeout for calls
    /// without a token, releases that stay possible when nothing was sent,
    /// DisposeAsync that awaits the release, and Dispose within its bound.
    /// </summary>
    [TestFixture]
    public class BoundsTests
    {
        static readonly TimeSpan S = U.S;

        /// <summary>
        /// The default bound, unchanged: a broker that never connects still
        /// ends every call, made without a token or with one that is never
        /// cancelled (ASP.NET's RequestAborted of a request whose client
        /// stays): a token ends a call sooner, never later.
        /// </summary>
        [Test]
        public void CallsEndByTheDefaultOperationTimeoutWithOrWithoutAToken()
        {
            Assert.AreNotEqual(Timeout.InfiniteTimeSpan, TicketBroker.DefaultOperationTimeout);
            using (var never = new CancellationTokenSource())
            using (var b = TicketBroker.Connect("127.0.0.1:1"))
            {
                var acquire = b.AcquireAsync("k", S, S, TimeSpan.Zero);
                var describe = b.DescribeAsync("k");
                var ready = b.WaitReadyAsync();
                var acquireWithToken = b.AcquireAsync("k", S, S, TimeSpan.Zero, never.Token);
                var describeWithToken = b.DescribeAsync("k", never.Token);
                var readyWithToken = b.WaitReadyAsync(never.Token);
                foreach (var t in new[] { acquire, acquireWithToken })
                {
                    var e = U.Ended<UnavailableException>(t);
                    StringAssert.Contains("not sent", e.Message);
                    StringAssert.Contains("operation timeout", e.Message);
                }
                StringAssert.Contains("operation timeout", U.Ended<UnavailableException>(describe).Message);
                StringAssert.Contains("operation timeout", U.Ended<UnavailableException>(describeWithToken).Message);
                U.Ended<UnavailableException>(ready);
                U.Ended<UnavailableException>(readyWithToken);
                Assert.IsFalse(never.IsCancellationRequested);
            }
        }

        [Test]
        public void TheOperationTimeoutIsConfigurableAndATokenEndsACallSooner()
        {
            using (var b = U.Builder("127.0.0.1:1").OperationTimeout(U.Ms(300)).Connect())
            {
                U.Ended<UnavailableException>(b.AcquireAsync("k", TimeSpan.Zero, S, TimeSpan.Zero));
                U.Ended<UnavailableException>(b.DescribeAsync("k"));
                using (var never = new CancellationTokenSource())
                {
                    U.Ended<UnavailableException>(b.AcquireAsync("k", TimeSpan.Zero, S, TimeSpan.Zero, never.Token));
                    U.Ended<UnavailableException>(b.DescribeAsync("k", never.Token));
                }
            }
            // A token that ends before the timeout ends the call, as the caller's own cancellation.
            using (var b = U.Builder("127.0.0.1:1").OperationTimeout(TimeSpan.FromHours(1)).Connect())
            using (var cts = new CancellationTokenSource())
            {
                var a = b.AcquireAsync("k", TimeSpan.Zero, S, TimeSpan.Zero, cts.Token);
                var d = b.DescribeAsync("k", cts.Token);
                cts.Cancel();
                Assert.AreEqual(cts.Token, U.Ended<OperationCanceledException>(a).CancellationToken);
                Assert.AreEqual(cts.Token, U.Ended<OperationCanceledException>(d).CancellationToken);
            }
            Assert.Throws<ArgumentOutOfRangeException>(() => TicketBroker.CreateBuilder().OperationTimeout(TimeSpan.Zero));
        }

        /// <summary>
        /// An acquire sent to a server that never answers ends by the
        /// timeout (plus its wait) as indeterminate, and its cancel is sent.
        /// </summary>
        [Test]
        public void ASentAcquireWithoutAnswerEndsIndeterminateByTheTimeout()
        {
            var cancelled = new ManualResetEventSlim();
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready();
                c.Expect(FrameType.Acquire);
                c.Expect(FrameType.Cancel, 60000);
                cancelled.Set();
                c.ClosedByClient(120000);
            }))
            using (var b = U.Ready(U.Builder(srv.Addr).OperationTimeout(U.Ms(500)).AnswerGraceForTests(TimeSpan.FromSeconds(60)).DrainForTests(U.Ms(100)).Connect()))
            {
                var e = U.Ended<IndeterminateException>(b.AcquireAsync("k", TimeSpan.Zero, S, TimeSpan.Zero));
                StringAssert.Contains("operation timeout", e.Message);
                Assert.AreEqual("k", e.Key);
                Assert.AreEqual(16, e.Owner.Count);
                Assert.IsTrue(cancelled.Wait(U.Patience), "no cancel was sent");
            }
        }

        /// <summary>
        /// Three servers, tasks acquiring and releasing without tokens; the
        /// leader and then the next leader are killed (no quorum is left):
        /// every task still ends.
        /// </summary>
        [Test]
        public void LeaderKillsDoNotHangCallsWithoutAToken()
        {
            using (var c = new Cluster(3))
            using (var b = U.Ready(U.Builder(c.AddrList).OperationTimeout(TimeSpan.FromSeconds(2)).Connect()))
            {
                long grants = 0;
                bool stop = false;
                var outcomes = new Dictionary<string, int>();
                Action<string> note = what => { lock (outcomes) { int n; outcomes.TryGetValue(what, out n); outcomes[what] = n + 1; } };
                var workers = Enumerable.Range(0, 32).Select(w => Task.Run(async () =>
                {
                    for (int i = 0; !Volatile.Read(ref stop); i++)
                    {
                        Ticket t;
                        try { t = await b.AcquireAsync("hang/" + ((w + i) % 8), S, TimeSpan.FromSeconds(3), TimeSpan.Zero); }
                        catch (TicketingException e) { note("acquire " + e.GetType().Name); continue; }
                        Interlocked.Increment(ref grants);
                        try { await t.ReleaseAsync(); note("released"); }
                        catch (TicketingException e) { note("release " + e.GetType().Name); }
                    }
                })).ToArray();
                var all = Task.WhenAll(workers);
                try
                {
                    U.WaitUntil("the load is granted", () => Interlocked.Read(ref grants) >= 50);
                    int leader = c.LeaderIndex();
                    c.Kill(leader);
                    int next = c.LeaderIndex();
                    long atKill = Interlocked.Read(ref grants);
                    U.WaitUntil("calls succeed against the next leader", () => Interlocked.Read(ref grants) > atKill + 10);
                    c.Kill(next);
                    // No quorum now: let the calls run into it for a while.
                    U.WaitUntil("calls end without a leader", () => { lock (outcomes) return outcomes.Keys.Any(k => k.StartsWith("acquire Unavailable")); });
                }
                finally
                {
                    Volatile.Write(ref stop, true);
                    if (!((IAsyncResult)all).AsyncWaitHandle.WaitOne(U.Patience))
                        Assert.Fail("calls without a token still pending " + U.Patience + " ms after the leaders were killed: a hang; outcomes " + Tally(outcomes));
                }
                Assert.IsFalse(all.IsFaulted, all.Exception != null ? all.Exception.ToString() : "");
                Console.WriteLine("csharp leader kills without tokens: grants " + grants + "; outcomes " + Tally(outcomes));
            }
        }

        static string Tally(Dictionary<string, int> outcomes)
        {
            lock (outcomes) return string.Join(", ", outcomes.Select(kv => kv.Key + "=" + kv.Value));
        }

        /// <summary>A release cancelled before it was sent leaves the ticket releasable: by ReleaseAsync, and by Dispose.</summary>
        [Test]
        public void AReleaseCancelledBeforeSendingLeavesTheTicketReleasable()
        {
            using (var c = new Cluster(1))
            using (var b = U.Ready(U.Connect(c.AddrList)))
            {
                var t = U.Get(b.AcquireAsync("unsent", TimeSpan.Zero, TimeSpan.FromSeconds(60), TimeSpan.Zero));
                U.Ended<OperationCanceledException>(t.ReleaseAsync(new CancellationToken(true)));
                Assert.IsTrue(U.Get(b.DescribeAsync("unsent")).Held, "a cancelled release was sent");
                U.Wait(t.ReleaseAsync());
                Assert.IsFalse(U.Get(b.DescribeAsync("unsent")).Held);

                var t2 = U.Get(b.AcquireAsync("unsent", TimeSpan.Zero, TimeSpan.FromSeconds(60), TimeSpan.Zero));
                U.Ended<OperationCanceledException>(t2.ReleaseAsync(new CancellationToken(true)));
                t2.Dispose();
                U.WaitUntil("Dispose sends the release a cancelled ReleaseAsync never sent", () => !U.Get(b.DescribeAsync("unsent")).Held);
            }
        }

        /// <summary>
        /// DisposeAsync (what await using calls) returns only after the
        /// release ended: a wait-0 acquire of the same key right after it
        /// always succeeds.
        /// </summary>
        [Test]
        public void DisposeAsyncAwaitsTheRelease()
        {
            using (var c = new Cluster(1))
            using (var b = U.Ready(U.Connect(c.AddrList)))
            {
                int notAcquired = 0;
                U.Wait(Task.Run(async () =>
                {
                    for (int i = 0; i < 200; i++)
                    {
                        Ticket t;
                        try { t = await b.AcquireAsync("await-using", TimeSpan.Zero, TimeSpan.FromSeconds(30), TimeSpan.Zero); }
                        catch (NotAcquiredException) { notAcquired++; continue; }
                        try { Assert.Greater(t.Token, 0UL); }
                        finally { await t.DisposeAsync(); }
                    }
                }));
                Assert.AreEqual(0, notAcquired, "acquires found the key still held after DisposeAsync returned");
                Assert.IsFalse(U.Get(b.DescribeAsync("await-using")).Held);
            }
        }

        /// <summary>
        /// Close's two phases, the cancelled acquires' answers and the
        /// background releases (here of a grant that answers the cancel late,
        /// 4 s into the close, and whose release the server never answers),
        /// share one bound of about ReleaseBound (5 s) instead of taking it one
        /// after the other.
        /// </summary>
        [Test]
        public void DisposeEndsWithinTheReleaseBound()
        {
            var obs = new U.Observed();
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready();
                var a = c.Expect(FrameType.Acquire);
                c.Expect(FrameType.Cancel, 60000);
                Thread.Sleep(4000); // the scripted server answers the cancel late, with a grant
                c.Send(new Frame { Type = FrameType.Granted, Id = a.Id, Token = 41, LeaseMs = 30000 });
                c.Silent(); // and never answers its release
            }))
            {
                var b = U.Ready(U.Builder(srv.Addr).ReleaseObserver(obs.Report).Connect());
                var pending = b.AcquireAsync("k", TimeSpan.FromSeconds(60), S, TimeSpan.Zero);
                U.WaitUntil("the acquire was sent", () => srv.Count(FrameType.Acquire) == 1);
                var sw = Stopwatch.StartNew();
                var closing = Task.Run(() => b.Dispose());
                Assert.IsTrue(closing.Wait(TimeSpan.FromSeconds(8)), "Dispose blocked beyond its bound of about 5 s");
                Console.WriteLine("csharp dispose: " + sw.ElapsedMilliseconds + " ms with a late grant whose release is never answered");
                U.Ended<IndeterminateException>(pending);
                U.WaitUntil("the late grant's release is reported", () => obs.Events.Count > 0);
                Assert.IsTrue(obs.Events[0].StartsWith("k/41/") && obs.Errors[0] != null, "the unanswered release of the late grant: " + obs);
            }
        }

        /// <summary>A dial blocked in a read (a server that accepts and never answers the TLS handshake or the hello) is woken by Dispose.</summary>
        [TestCase(false)]
        [TestCase(true)]
        public void DisposeWakesADialBlockedInARead(bool tls)
        {
            using (var srv = new FakeServer(c => c.Silent()))
            {
                var builder = U.Builder(srv.Addr).DialTimeout(TimeSpan.FromMinutes(2));
                if (tls) builder.Tls(TlsMode.InsecureSkipVerify);
                var b = builder.Connect();
                // Once the client's first bytes arrived, it reads the answer.
                U.WaitUntil("the dial sent its first bytes", () => Interlocked.Read(ref srv.RawBytes) > 0);
                var closing = Task.Run(() => b.Dispose());
                Assert.IsTrue(closing.Wait(TimeSpan.FromSeconds(9)), "Dispose waited for the blocked dial");
            }
        }
    }
}
