using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;
using Ticketing.Wire;

namespace Ticketing.Tests
{
    /// <summary>
    /// Every behaviour rule of the client document, each provoked against the
    /// scriptable fake server (FakeServer). The meaning of each rule is the Go
    /// client's (its package documentation and docs/protocol.md).
    /// </summary>
    [TestFixture]
    public class RuleTests
    {
        static readonly TimeSpan S = U.S;
        static string Str(byte[] b) { return Encoding.UTF8.GetString(b); }

        // ---------- Rule 1: argument ranges, rounding up, rejection before sending ----------

        [Test]
        public void Rule1_InvalidArgumentsRejectedBeforeSending()
        {
            var table = new LockTable();
            using (var srv = new FakeServer(FakeServer.Normal(table)))
            using (var b = U.Ready(U.Connect(srv.Addr)))
            {
                var cases = new[]
                {
                    new object[] { "empty key", "", S, S, TimeSpan.Zero },
                    new object[] { "key over 1024 bytes", new string('k', 1025), S, S, TimeSpan.Zero },
                    new object[] { "key over 1024 UTF-8 bytes", new string('é', 513), S, S, TimeSpan.Zero },
                    new object[] { "negative wait", "k", TimeSpan.FromTicks(-1), S, TimeSpan.Zero },
                    new object[] { "wait over 255 s after rounding up", "k", TimeSpan.FromSeconds(255) + TimeSpan.FromTicks(1), S, TimeSpan.Zero },
                    new object[] { "zero lease", "k", TimeSpan.Zero, TimeSpan.Zero, TimeSpan.Zero },
                    new object[] { "negative lease", "k", TimeSpan.Zero, -S, TimeSpan.Zero },
                    new object[] { "lease over 250 s after rounding up", "k", TimeSpan.Zero, TimeSpan.FromSeconds(250) + U.Ms(1), TimeSpan.Zero },
                    new object[] { "negative budget", "k", TimeSpan.Zero, S, TimeSpan.FromTicks(-1) },
                    new object[] { "budget over the rounded lease", "k", TimeSpan.Zero, U.Ms(500), U.Ms(1500) },
                    new object[] { "work over 250 s", "k", TimeSpan.Zero, TimeSpan.FromSeconds(250), TimeSpan.FromSeconds(251) },
                    // A budget no grant of that lease could ever leave is refused before a token is spent on it.
                    new object[] { "budget equal to the rounded lease", "k", TimeSpan.Zero, U.Ms(2500), TimeSpan.FromSeconds(3) },
                    new object[] { "budget above what the lease can leave", "k", TimeSpan.Zero, TimeSpan.FromSeconds(30), U.Ms(29700) },
                    // The budget rounds up like wait and lease.
                    new object[] { "budget that rounds up past what the lease leaves", "k", TimeSpan.Zero, TimeSpan.FromSeconds(10), U.Ms(9500) },
                };
                foreach (var c in cases)
                {
                    // Thrown by the call itself (a usage error), not by its task.
                    ArgumentException e = null;
                    try { b.AcquireAsync((string)c[1], (TimeSpan)c[2], (TimeSpan)c[3], (TimeSpan)c[4]); }
                    catch (ArgumentException x) { e = x; }
                    Assert.IsNotNull(e, (string)c[0] + ": no ArgumentException thrown by the call");
                    StringAssert.Contains("nothing was sent", e.Message, (string)c[0]);
                    Assert.AreEqual(((string)c[0]).Contains("key") ? "key" : ((string)c[0]).Contains("wait") ? "wait" : ((string)c[0]).Contains("lease") && !((string)c[0]).Contains("budget") ? "lease" : "budget",
                        e.ParamName, (string)c[0]);
                    if (e.ParamName != "key") Assert.IsInstanceOf<ArgumentOutOfRangeException>(e, (string)c[0]);
                }
                Assert.AreEqual("key", Assert.Throws<ArgumentNullException>(() => b.AcquireAsync(null, S, S, TimeSpan.Zero)).ParamName);
                Assert.AreEqual("key", Assert.Throws<ArgumentNullException>(() => b.DescribeAsync(null)).ParamName);
                Assert.AreEqual("key", Assert.Throws<ArgumentException>(() => b.DescribeAsync("")).ParamName);
                Assert.AreEqual("key", Assert.Throws<ArgumentException>(() => b.ReleaseTokenAsync("", 1)).ParamName);
                Assert.AreEqual("token", Assert.Throws<ArgumentOutOfRangeException>(() => b.ReleaseTokenAsync("k", 0)).ParamName);
                var fit = Assert.Throws<ArgumentOutOfRangeException>(() => b.AcquireAsync("k", TimeSpan.Zero, TimeSpan.FromSeconds(30), TimeSpan.FromSeconds(45)));
                StringAssert.Contains("at most 29.6 s of conservative time left", fit.Message);
                StringAssert.Contains("use a budget of at most 29 s", fit.Message);

                // Fractions round up; the boundaries are accepted; zero wait stays zero.
                var t = U.Get(b.AcquireAsync("round", U.Ms(1200), U.Ms(2500), S));
                U.Wait(t.ReleaseAsync());
                t = U.Get(b.AcquireAsync("max", TimeSpan.Zero, TimeSpan.FromSeconds(250), TimeSpan.FromSeconds(250) - TimeSpan.FromSeconds(5)));
                U.Wait(t.ReleaseAsync());
                var acq = srv.Received.Where(f => f.Type == FrameType.Acquire).ToList();
                Assert.AreEqual(2, acq.Count, "only the two valid acquires reach the server");
                Assert.AreEqual("round", Str(acq[0].Key));
                Assert.AreEqual(2, acq[0].Wait, "wait 1.2 s rounds up to 2 s");
                Assert.AreEqual(3, acq[0].Lease, "lease 2.5 s rounds up to 3 s");
                Assert.AreEqual(0, acq[1].Wait);
                Assert.AreEqual(250, acq[1].Lease);
                Assert.AreEqual(0, srv.Count(FrameType.Describe));
            }
        }

        // ---------- Authorization: F is a final answer; the connection stays open ----------

        /// <summary>
        /// Refuses every request on keys under "no/" (acquire by key, describe by
        /// role, releases by owner) and the releases of keys under "deny/",
        /// answers a describe of "busy" with B 4, and serves the rest from table.
        /// </summary>
        static Action<FakeConn> Refusing(LockTable table)
        {
            return c =>
            {
                c.Hello(); c.Ready();
                for (;;)
                {
                    var f = c.Next(120000);
                    var key = Str(f.Key);
                    Frame a;
                    if (key.StartsWith("no/"))
                    {
                        byte reason = f.Type == FrameType.Acquire ? (byte)PermissionReason.Key
                            : f.Type == FrameType.Describe ? (byte)PermissionReason.Role : (byte)PermissionReason.Owner;
                        a = f.Type == FrameType.Cancel ? null : new Frame { Type = FrameType.Forbidden, Id = f.Id, Reason = reason };
                    }
                    else if (key.StartsWith("deny/") && (f.Type == FrameType.Release || f.Type == FrameType.ReleaseOwner))
                        a = new Frame { Type = FrameType.Forbidden, Id = f.Id, Reason = (byte)PermissionReason.Owner };
                    else if (f.Type == FrameType.Describe && key == "busy")
                        a = new Frame { Type = FrameType.Capacity, Id = f.Id, Reason = (byte)CapacityReason.InFlight };
                    else
                        a = table.Answer(f);
                    if (a != null) c.Send(a);
                }
            };
        }

        [Test]
        public void Forbidden_IsAFinalPermissionDeniedAndTheConnectionStaysOpen()
        {
            var table = new LockTable();
            var obs = new U.Observed();
            using (var srv = new FakeServer(Refusing(table)))
            using (var b = U.Ready(U.Builder(srv.Addr).ReleaseObserver(obs.Report).Connect()))
            {
                var e = U.Throws<PermissionDeniedException>(() => b.AcquireAsync("no/1", TimeSpan.FromSeconds(5), S, TimeSpan.Zero));
                Assert.AreEqual(PermissionReason.Key, e.Reason);
                Assert.AreEqual(srv.Addr, e.Address);
                StringAssert.Contains("permission denied", e.Message);
                StringAssert.Contains(e.ReasonText, e.Message);
                StringAssert.Contains("not acquired", e.Message);

                Assert.AreEqual(PermissionReason.Role, U.Throws<PermissionDeniedException>(() => b.DescribeAsync("no/1")).Reason);
                Assert.AreEqual(CapacityReason.InFlight, U.Throws<CapacityException>(() => b.DescribeAsync("busy")).Reason);

                // A refused release is final: sent once, never retried.
                var r = U.Throws<PermissionDeniedException>(() => b.ReleaseTokenAsync("no/1", 7));
                Assert.AreEqual(PermissionReason.Owner, r.Reason);
                StringAssert.Contains("not released", r.Message);
                Assert.AreEqual(1, srv.Count(FrameType.Release), "a release answered F was sent again");

                // A ticket's release refused: thrown by ReleaseAsync, reported to the
                // observer by the background release of Dispose; each sent once.
                var held = U.Get(b.AcquireAsync("deny/1", TimeSpan.Zero, S, TimeSpan.Zero));
                Assert.AreEqual(PermissionReason.Owner, U.Throws<PermissionDeniedException>(() => held.ReleaseAsync()).Reason);
                var held2 = U.Get(b.AcquireAsync("deny/2", TimeSpan.Zero, S, TimeSpan.Zero));
                held2.Dispose();
                U.WaitUntil("the background release's refusal reaches the observer", () => obs.Has("deny/2/" + held2.Token + "/PermissionDeniedException"));
                Assert.AreEqual(3, srv.Count(FrameType.Release), "a release answered F was sent again");

                var t = U.Get(b.AcquireAsync("yes/1", TimeSpan.Zero, S, TimeSpan.Zero));
                U.Wait(t.ReleaseAsync());
                Assert.IsFalse(U.Get(b.DescribeAsync("yes/1")).Held);
                Assert.AreEqual(1, srv.Accepted, "a refusal ended the connection");
            }
        }

        // ---------- Rule 2: a lost final answer is Indeterminate; an acquire is never re-sent ----------

        [Test]
        public void Rule2_IndeterminateOnDrop()
        {
            var table = new LockTable();
            var owners = new U.Observed();
            // The server grants (in its table) but the connection drops before the G goes out.
            using (var srv = new FakeServer(c => { c.Hello(); c.Ready(); table.Answer(c.Expect(FrameType.Acquire)); c.Close(); }, FakeServer.Normal(table)))
            using (var b = U.Ready(U.Builder(srv.Addr).OwnerObserverForTests((k, o, e) => owners.Report(k + "/" + VectorTests.ToHex(o), 0, e)).Connect()))
            {
                var e = U.Throws<IndeterminateException>(() => b.AcquireAsync("k", S, S, TimeSpan.Zero));
                StringAssert.Contains("do not enter the critical section", e.Message);
                Assert.IsFalse(e.BrokerClosed);
                Assert.AreEqual("k", e.Key);
                var a = srv.Received.First(f => f.Type == FrameType.Acquire);
                Assert.AreEqual(VectorTests.ToHex(a.Owner), VectorTests.ToHex(e.Owner.ToArray()));
                // Once reconnected, the client ends the orphaned grant by its owner (U).
                U.WaitUntil("the orphaned grant is released by owner", () => owners.Has("k/" + VectorTests.ToHex(a.Owner) + "/0/ok"));
                var u = srv.Received.Single(f => f.Type == FrameType.ReleaseOwner);
                Assert.AreEqual("k", Str(u.Key));
                Assert.IsFalse(U.Get(b.DescribeAsync("k")).Held);
                // The broker reconnects; the lost acquire is not re-sent: the next request is this describe.
                U.Get(b.DescribeAsync("other"));
                Assert.AreEqual(1, srv.Count(FrameType.Acquire), "the acquire was re-sent");
                Assert.AreEqual(2, srv.Accepted);
            }
        }

        [Test]
        public void Rule2_IndeterminateOnSilence()
        {
            // Ping interval 100 ms; after the acquire the server says nothing at all.
            using (var srv = new FakeServer(c => { c.Hello(); c.Ready(100); c.Expect(FrameType.Acquire); c.ClosedByClient(); }))
            using (var b = U.Ready(U.Connect(srv.Addr)))
            {
                var e = U.Throws<IndeterminateException>(() => b.AcquireAsync("k", S, S, TimeSpan.Zero));
                StringAssert.Contains("sent nothing for", e.Message);
            }
        }

        [Test]
        public void Rule2_ClientPingsWhenServerSendsNone()
        {
            // Y with interval 0: the server sends no pings, so the client sends its own
            // and gives up on a server that answers nothing for three of its intervals.
            var pinged = new ManualResetEventSlim();
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready(0);
                for (;;)
                {
                    var f = c.Recv();
                    if (f.Type == FrameType.Ping) pinged.Set(); // never answered
                }
            }))
            using (var b = U.Ready(U.Builder(srv.Addr).OwnPingForTests(U.Ms(100)).Connect()))
            {
                var t = b.AcquireAsync("k", S, S, TimeSpan.Zero);
                var e = U.Ended<IndeterminateException>(t);
                StringAssert.Contains("sent nothing for", e.Message);
                Assert.IsTrue(pinged.IsSet, "the client sent no ping");
            }
        }

        [Test]
        public void Rule2_NoAnswerWithinWaitPlusGraceIsIndeterminateAndLateGrantReleased()
        {
            var obs = new U.Observed();
            var gotCancel = new ManualResetEventSlim();
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready(60000);
                var a = c.Expect(FrameType.Acquire);
                var x = c.Expect(FrameType.Cancel);
                if (x.Id == a.Id) gotCancel.Set();
                c.Send(new Frame { Type = FrameType.Granted, Id = a.Id, Token = 5, LeaseMs = 1000 });
                var l = c.Expect(FrameType.Release);
                c.Send(new Frame { Type = l.Token == 5 ? FrameType.Released : FrameType.NotHeld, Id = l.Id });
                c.ClosedByClient(120000);
            }))
            using (var b = U.Ready(U.Builder(srv.Addr).AnswerGraceForTests(U.Ms(200)).ReleaseObserver(obs.Report).Connect()))
            {
                var e = U.Throws<IndeterminateException>(() => b.AcquireAsync("k", TimeSpan.Zero, S, TimeSpan.Zero));
                StringAssert.Contains("no final answer within the wait", e.Message);
                U.WaitUntil("the late grant is released with its exact token", () => obs.Has("k/5/ok"));
                Assert.IsTrue(gotCancel.IsSet);
            }
        }

        // ---------- Rule 3: cancellation ----------

        [Test]
        public void Rule3_CancelBeforeSendSendsNothing()
        {
            var table = new LockTable();
            using (var srv = new FakeServer(FakeServer.Normal(table)))
            using (var b = U.Ready(U.Connect(srv.Addr)))
            {
                var cts = new CancellationTokenSource();
                cts.Cancel();
                var e = U.Throws<OperationCanceledException>(() => b.AcquireAsync("k", S, S, TimeSpan.Zero, cts.Token));
                StringAssert.Contains("not sent", e.Message);
                U.Throws<OperationCanceledException>(() => b.DescribeAsync("k", cts.Token));
                U.Throws<OperationCanceledException>(() => b.ReleaseTokenAsync("k", 3, cts.Token));
                U.Get(b.DescribeAsync("probe")); // ordered after anything the calls above could have sent
                Assert.AreEqual(0, srv.Count(FrameType.Acquire));
                Assert.AreEqual(0, srv.Count(FrameType.Release));
                Assert.AreEqual(1, srv.Count(FrameType.Describe));
            }
            // Without a connection: cancelled while waiting for one, nothing is sent either.
            using (var b = U.Connect("127.0.0.1:1"))
            {
                var cts = new CancellationTokenSource(50);
                var e = U.Throws<OperationCanceledException>(() => b.AcquireAsync("k", S, S, TimeSpan.Zero, cts.Token));
                StringAssert.Contains("not sent: no connection to the leader yet", e.Message);
            }
        }

        [Test]
        public void Rule3_CancelAfterSendSendsCancelAndReleasesLateGrant()
        {
            var obs = new U.Observed();
            var gotAcquire = new ManualResetEventSlim();
            string problem = null;
            var table = new LockTable();
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready();
                var a = c.Expect(FrameType.Acquire);
                gotAcquire.Set();
                var x = c.Expect(FrameType.Cancel);
                if (x.Id != a.Id || VectorTests.ToHex(x.Owner) != VectorTests.ToHex(a.Owner)) problem = "the cancel names another acquire";
                // The grant won the race with the cancel: the client must release exactly token 77.
                c.Send(new Frame { Type = FrameType.Granted, Id = a.Id, Token = 77, LeaseMs = 30000 });
                var l = c.Expect(FrameType.Release);
                if (l.Token != 77 || Str(l.Key) != "k") problem = "released " + Str(l.Key) + "/" + l.Token;
                c.Send(new Frame { Type = FrameType.Released, Id = l.Id });
                c.Serve(table);
            }))
            using (var b = U.Ready(U.Builder(srv.Addr).ReleaseObserver(obs.Report).Connect()))
            {
                var cts = new CancellationTokenSource();
                var t = b.AcquireAsync("k", TimeSpan.FromSeconds(30), TimeSpan.FromSeconds(30), TimeSpan.Zero, cts.Token);
                Assert.IsTrue(gotAcquire.Wait(U.Patience));
                cts.Cancel();
                var e = U.Ended<OperationCanceledException>(t);
                StringAssert.Contains("a cancel was sent", e.Message);
                U.WaitUntil("the late grant is released", () => obs.Has("k/77/ok"));
                Assert.IsNull(problem, problem);
                // Other requests on the connection are not affected.
                Assert.IsFalse(U.Get(b.DescribeAsync("k")).Held);
                Assert.AreEqual(1, srv.Accepted);
            }
        }

        [Test]
        public void Rule3_CancelWhileWaitingForInFlightSlot()
        {
            var first = new ManualResetEventSlim();
            var answerFirst = new ManualResetEventSlim();
            var table = new LockTable();
            var order = new List<string>();
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready(5000, 1);
                var a = c.Expect(FrameType.Acquire);
                first.Set();
                answerFirst.Wait(U.Patience);
                c.Send(new Frame { Type = FrameType.NotAcquired, Id = a.Id });
                for (;;)
                {
                    var f = c.Next(120000);
                    lock (order) order.Add(Str(f.Key));
                    var ans = table.Answer(f);
                    if (ans != null) c.Send(ans);
                }
            }))
            using (var b = U.Ready(U.Connect(srv.Addr)))
            {
                var t1 = b.AcquireAsync("one", S, S, TimeSpan.Zero);
                Assert.IsTrue(first.Wait(U.Patience));
                var cts = new CancellationTokenSource();
                var t2 = b.AcquireAsync("two", S, S, TimeSpan.Zero, cts.Token);
                U.WaitUntil("the second acquire waits for a slot", () => b.CurrentForTests.SlotWaiters == 1);
                cts.Cancel();
                var e = U.Ended<OperationCanceledException>(t2);
                StringAssert.Contains("not sent", e.Message);
                answerFirst.Set();
                U.Ended<NotAcquiredException>(t1);
                var t3 = U.Get(b.AcquireAsync("three", S, S, TimeSpan.Zero));
                U.Wait(t3.ReleaseAsync());
                lock (order) CollectionAssert.AreEqual(new[] { "three", "three" }, order, "the cancelled acquire was sent");
            }
        }

        // ---------- Rule 4: M, every E, invalid frames end the session ----------

        static readonly Dictionary<string, Action<FakeConn, Frame>> Fatal = new Dictionary<string, Action<FakeConn, Frame>>
        {
            { "M", (c, a) => c.Send(new Frame { Type = FrameType.NotLeader, Text = new byte[0] }) },
            { "E internal", (c, a) => c.SendError(ErrorCode.Internal, "boom") },
            { "E shutting down", (c, a) => c.SendError(ErrorCode.ShuttingDown, "bye") },
            { "malformed G", (c, a) => c.SendRaw(VectorTests.Hex("000000144700000001000000000000000100007530000000")) },
            { "oversized", (c, a) => c.SendRaw(VectorTests.Hex("0001000141")) },
            { "unknown type", (c, a) => c.SendRaw(VectorTests.Hex("000000056100000007")) },
            { "answer for an id not in flight", (c, a) => c.Send(new Frame { Type = FrameType.Released, Id = a.Id + 1000 }) },
            { "answer of the wrong kind", (c, a) => c.Send(new Frame { Type = FrameType.Info, Id = a.Id }) },
            { "server-only frame type from the server", (c, a) => c.Send(new Frame { Type = FrameType.Hello, Version = 1 }) },
            { "second Q", (c, a) => { c.Send(new Frame { Type = FrameType.Queued, Id = a.Id, Count = 1 }); c.Send(new Frame { Type = FrameType.Queued, Id = a.Id, Count = 1 }); } },
        };

        public static IEnumerable<string> FatalNames() { return Fatal.Keys.ToList(); }

        [Test, TestCaseSource("FatalNames")]
        public void Rule4_SessionFatalFrameMakesInFlightIndeterminate(string name)
        {
            var table = new LockTable();
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready(60000); // no silence detection within the test's patience
                var a = c.Expect(FrameType.Acquire);
                c.Expect(FrameType.Describe);
                Fatal[name](c, a);
                // The fake does not close the connection itself (a real server
                // does after M and E): the client must end the session on its own.
                c.ClosedByClient(120000);
            }, FakeServer.Normal(table)))
            using (var b = U.Ready(U.Connect(srv.Addr)))
            {
                var acq = b.AcquireAsync("k", TimeSpan.FromSeconds(10), S, TimeSpan.Zero);
                U.WaitUntil("the server got the acquire", () => srv.Count(FrameType.Acquire) == 1);
                var desc = b.DescribeAsync("k");
                var e = U.Ended<IndeterminateException>(acq);
                StringAssert.Contains("outcome unknown", e.Message);
                // Ended by the frame itself, not by anything else.
                StringAssert.Contains(name == "M" ? "stopped being the leader" : name.StartsWith("E") ? "ended the session with error" : "sent an invalid frame", e.Message);
                U.Ended<UnavailableException>(desc);
                if (name.StartsWith("E")) Assert.IsNotNull(e.ServerCode);
                // The broker reconnects, and the acquire is not re-sent.
                U.Get(b.DescribeAsync("after"));
                Assert.AreEqual(2, srv.Accepted);
                Assert.AreEqual(1, srv.Count(FrameType.Acquire));
            }
        }

        [Test]
        public void Rule4_ReconnectFollowsLeaderHint()
        {
            var table = new LockTable();
            using (var leader = new FakeServer(FakeServer.Normal(table)))
            using (var follower = new FakeServer(
                c => { c.Hello(); c.Send(new Frame { Type = FrameType.NotLeader, Text = Encoding.UTF8.GetBytes(leader.Addr) }); }))
            using (var b = U.Ready(U.Connect(follower.Addr)))
            {
                Assert.AreEqual(1, leader.Accepted, "the broker did not follow the hello's M to the leader");
                var t = U.Get(b.AcquireAsync("k", S, S, TimeSpan.Zero));
                U.Wait(t.ReleaseAsync());
            }
            // M in the middle of a session names the new leader: the broker goes there next.
            using (var next = new FakeServer(FakeServer.Normal(table)))
            using (var old = new FakeServer(c =>
            {
                c.Hello(); c.Ready();
                c.Expect(FrameType.Describe);
                c.Send(new Frame { Type = FrameType.NotLeader, Text = Encoding.UTF8.GetBytes(next.Addr) });
                c.ClosedByClient();
            }))
            using (var b = U.Ready(U.Connect(old.Addr)))
            {
                U.Ended<UnavailableException>(b.DescribeAsync("k"));
                U.Get(b.DescribeAsync("k"));
                Assert.AreEqual(1, next.Accepted);
            }
        }

        /// <summary>
        /// Leader hints are followed at most (addresses + 2) times in a row, then
        /// the broker backs off and starts again from its configured addresses
        /// (the Go client's rule, docs/protocol.md). A names B, B names C, C names
        /// B: a broker configured with A alone follows A, B, C, B (three hints),
        /// backs off, and its fifth attempt starts a new round, not at C: at A for
        /// an M answering the hello, at B (the last server that accepted a
        /// session) for an M ending an established session.
        /// </summary>
        [Test]
        public void Rule4_LeaderHintsFollowedAtMostAddressesPlusTwoTimesInARow()
        {
            foreach (var inSession in new[] { false, true })
            {
                var order = new List<string>();
                var addrs = new Dictionary<string, string>();
                var next = new Dictionary<string, string> { { "A", "B" }, { "B", "C" }, { "C", "B" } };
                Func<string, Action<FakeConn>> script = name => c =>
                {
                    c.Hello();
                    if (inSession) c.Ready();
                    string to;
                    lock (order) { order.Add(name); to = addrs[next[name]]; }
                    c.Send(new Frame { Type = FrameType.NotLeader, Text = Encoding.UTF8.GetBytes(to) });
                    c.ClosedByClient();
                };
                using (var a = new FakeServer(script("A")))
                using (var bs = new FakeServer(script("B")))
                using (var cs = new FakeServer(script("C")))
                {
                    lock (order) { addrs["A"] = a.Addr; addrs["B"] = bs.Addr; addrs["C"] = cs.Addr; }
                    using (var b = U.Connect(a.Addr))
                    {
                        U.WaitUntil("five attempts", () => { lock (order) return order.Count >= 5; });
                        // After the limit a new round starts with the last server that
                        // accepted a session (B, when the Ms end sessions), else with A.
                        lock (order)
                            Assert.AreEqual(new[] { "A", "B", "C", "B", inSession ? "B" : "A" }, order.Take(5).ToArray(),
                                (inSession ? "M ending sessions" : "M answering hellos") + ": hints followed after the limit");
                    }
                }
            }
        }

        /// <summary>
        /// A hello refusal by one address only moves the broker on
        /// (docs/protocol.md, "Refusals"): with A refusing the token and B
        /// serving, WaitReady and calls succeed through B and never fail with
        /// A's refusal. Only when every address refuses alike is the refusal
        /// reported promptly.
        /// </summary>
        [Test]
        public void Rule4_OneRefusingAddressDoesNotFailCalls()
        {
            var refuse = new ManualResetEventSlim();
            var table = new LockTable();
            Action<FakeConn> refusing = c => { c.Hello(); refuse.Wait(); c.SendError(ErrorCode.Unauthenticated, "wrong token"); c.ClosedByClient(); };
            using (var a = new FakeServer(refusing))
            using (var good = new FakeServer(FakeServer.Normal(table)))
            using (var a2 = new FakeServer(refusing))
            {
                using (var b = U.Connect(a.Addr + "," + good.Addr))
                {
                    U.WaitUntil("the first address got the hello", () => a.Count(FrameType.Hello) >= 1);
                    var ready = b.WaitReadyAsync(TimeSpan.FromSeconds(20));
                    var t = b.AcquireAsync("k", TimeSpan.Zero, S, TimeSpan.Zero);
                    refuse.Set();
                    U.Wait(ready);
                    U.Wait(U.Get(t).ReleaseAsync());
                }
                using (var all = U.Connect(a.Addr + "," + a2.Addr))
                {
                    var e = U.Throws<UnauthenticatedException>(() => all.WaitReadyAsync(TimeSpan.FromSeconds(20)));
                    Assert.AreEqual(ErrorCode.Unauthenticated, e.ServerCode);
                }
            }
        }

        /// <summary>
        /// A describe is bounded on a live connection too (docs/protocol.md,
        /// Liveness): a server that answers pings but never the D leaves the
        /// caller with UnavailableException after the answer grace, and the
        /// connection keeps serving.
        /// </summary>
        [Test]
        public void Rule2_DescribeWithoutAnswerOnALiveConnectionIsBounded()
        {
            var table = new LockTable();
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready();
                for (;;)
                {
                    var f = c.Next(120000);
                    if (f.Type == FrameType.Describe && Str(f.Key) == "silent") continue; // never answered
                    var a = table.Answer(f);
                    if (a != null) c.Send(a);
                }
            }))
            using (var b = U.Ready(U.Builder(srv.Addr).AnswerGraceForTests(U.Ms(200)).Connect()))
            {
                var e = U.Throws<UnavailableException>(() => b.DescribeAsync("silent"));
                StringAssert.Contains("although the connection is alive", e.Message);
                Assert.IsFalse(U.Get(b.DescribeAsync("other")).Held);
                Assert.AreEqual(1, srv.Accepted);
            }
        }

        /// <summary>
        /// Reconnect order (docs/protocol.md, "Order"): after a session ends
        /// without a hint, the next round starts with the last server that
        /// accepted a session. With A then B configured and A's first session
        /// ended by the server with a frame (E 11), the broker's next session
        /// is with A again. (A session that died of silence or a drop is the
        /// opposite case: Rule4_ASilentServerIsDialedLast.)
        /// </summary>
        [Test]
        public void Rule4_ALostSessionReconnectsToTheLastGoodServerFirst()
        {
            var table = new LockTable();
            using (var a = new FakeServer(c => { c.Hello(); c.Ready(); c.Expect(FrameType.Describe); c.SendError(ErrorCode.ShuttingDown, "stopping"); c.Close(); }, FakeServer.Normal(table)))
            using (var b2 = new FakeServer(FakeServer.Normal(table)))
            using (var b = U.Ready(U.Connect(a.Addr + "," + b2.Addr)))
            {
                U.Throws<UnavailableException>(() => b.DescribeAsync("k"));
                Assert.IsFalse(U.Get(b.DescribeAsync("k")).Held);
                Assert.AreEqual(2, a.Count(FrameType.Describe), "the second describe went elsewhere");
                Assert.AreEqual(0, b2.Accepted, "the broker skipped the last good server");
            }
        }

        /// <summary>
        /// A server that goes silent (paused, or cut off without resets) still
        /// accepts TCP connections, so the reconnect after its session was
        /// given up tries the other servers first (the Go client's
        /// TestSilentServerIsDialedLast). This client dials one address at a
        /// time, so the order alone decides which server gets the next session.
        /// </summary>
        [Test]
        public void Rule4_ASilentServerIsDialedLast()
        {
            var table = new LockTable();
            // The first session: pings every 100 ms announced, then nothing; later
            // connections are hung up at once (only counted).
            using (var silent = new FakeServer(c => { c.Hello(); c.Ready(100); c.ClosedByClient(); }, c => c.Close()))
            using (var good = new FakeServer(FakeServer.Normal(table)))
            using (var b = U.Connect(silent.Addr + "," + good.Addr))
            {
                U.WaitUntil("the broker reconnected to the other server", () =>
                {
                    var c = b.CurrentForTests;
                    return c != null && c.Addr == good.Addr;
                });
                Assert.AreEqual(1, good.Accepted);
                // The first listed server had the first session (and gave it up).
                Assert.AreEqual(1, silent.Accepted, "the silent server was dialed again before the other one");
            }
        }

        /// <summary>
        /// Within a round the next address is tried at once; the broker backs off
        /// only after every address of the round failed. With a backoff of an
        /// hour, a first address that hangs up still leaves the broker connected
        /// through the second.
        /// </summary>
        [Test]
        public void Rule4_AFailedAddressMovesOnAtOnceWithinARound()
        {
            var table = new LockTable();
            using (var dead = new FakeServer(c => c.Close()))
            using (var good = new FakeServer(FakeServer.Normal(table)))
            using (var b = TicketBroker.CreateBuilder().Addresses(dead.Addr + "," + good.Addr).BackoffForTests(TimeSpan.FromHours(1), TimeSpan.FromHours(1)).Connect())
            {
                U.Wait(b.WaitReadyAsync(TimeSpan.FromSeconds(20)));
                Assert.AreEqual(1, good.Accepted);
            }
        }

        // ---------- Rule 5: B is final and not retried ----------

        [Test]
        public void Rule5_CapacityRejectIsFinalAndNotRetried()
        {
            string problem = null;
            var table = new LockTable();
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready();
                var a = c.Expect(FrameType.Acquire);
                c.Send(new Frame { Type = FrameType.Capacity, Id = a.Id, Reason = (byte)CapacityReason.Held });
                var next = c.Next();
                if (next.Type != FrameType.Describe) problem = "after B the client sent " + FrameType.Name(next.Type);
                c.Send(table.Answer(next));
                c.Serve(table);
            }))
            using (var b = U.Ready(U.Connect(srv.Addr)))
            {
                var e = U.Throws<CapacityException>(() => b.AcquireAsync("k", S, S, TimeSpan.Zero));
                Assert.AreEqual(CapacityReason.Held, e.Reason);
                StringAssert.Contains("not retried", e.Message);
                U.Get(b.DescribeAsync("k"));
                Assert.IsNull(problem, problem);
                Assert.AreEqual(1, srv.Count(FrameType.Acquire));
            }
        }

        // ---------- Rule 6: releases ----------

        [Test]
        public void Rule6_ReleaseOutcomes()
        {
            var table = new LockTable();
            using (var srv = new FakeServer(FakeServer.Normal(table)))
            using (var b = U.Ready(U.Connect(srv.Addr)))
            {
                var t = U.Get(b.AcquireAsync("k", S, S, TimeSpan.Zero));
                U.Wait(t.ReleaseAsync());
                U.Wait(t.ReleaseAsync()); // the first outcome again, nothing sent
                Assert.AreEqual(1, srv.Count(FrameType.Release));
                var e = U.Throws<NotHeldException>(() => b.ReleaseTokenAsync("k", t.Token));
                StringAssert.Contains("does not hold the key", e.Message);
                var t2 = U.Get(b.AcquireAsync("k", S, S, TimeSpan.Zero));
                U.Throws<NotHeldException>(() => b.ReleaseTokenAsync("k", t2.Token + 1));
                Assert.IsTrue(U.Get(b.DescribeAsync("k")).Held, "a release with another token ended the grant");
                U.Wait(b.ReleaseTokenAsync("k", t2.Token));
                U.Throws<NotHeldException>(() => t2.ReleaseAsync());
            }
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready();
                var l = c.Expect(FrameType.Release);
                c.Send(new Frame { Type = FrameType.Capacity, Id = l.Id, Reason = (byte)CapacityReason.InFlight });
                c.ClosedByClient();
            }))
            using (var b = U.Ready(U.Connect(srv.Addr)))
            {
                var e = U.Throws<CapacityException>(() => b.ReleaseTokenAsync("k", 9));
                Assert.AreEqual(CapacityReason.InFlight, e.Reason);
            }
        }

        [Test]
        public void Rule6_ReleaseRetriesExactTokenAcrossReconnect()
        {
            using (var srv = new FakeServer(
                c => { c.Hello(); c.Ready(); c.Expect(FrameType.Release); c.Close(); },
                c => { c.Hello(); c.Ready(); var l = c.Expect(FrameType.Release); c.Send(new Frame { Type = FrameType.Released, Id = l.Id }); c.ClosedByClient(); }))
            using (var b = U.Ready(U.Connect(srv.Addr)))
            {
                U.Wait(b.ReleaseTokenAsync("k", 42));
                var ls = srv.Received.Where(f => f.Type == FrameType.Release).ToList();
                Assert.AreEqual(2, ls.Count);
                Assert.IsTrue(ls.All(l => l.Token == 42 && Str(l.Key) == "k"), "not the exact token");
            }
        }

        /// <summary>
        /// N to a release sent again after the first attempt's answer was lost
        /// is a NotHeldAfterRetryException (still a NotHeldException): the
        /// earlier attempt may be what released it. N to a first attempt is a
        /// plain NotHeldException (the Go client's
        /// TestReleaseNotHeldAfterLostAnswerIsDistinct).
        /// </summary>
        [Test]
        public void Rule6_NotHeldAfterALostAnswerIsDistinct()
        {
            Action<FakeConn> answerN = c =>
            {
                for (;;)
                {
                    var l = c.Expect(FrameType.Release);
                    c.Send(new Frame { Type = FrameType.NotHeld, Id = l.Id });
                }
            };
            using (var srv = new FakeServer(
                c => { c.Hello(); c.Ready(); c.Expect(FrameType.Release); c.Close(); }, // released, but the answer is lost
                c => { c.Hello(); c.Ready(); answerN(c); }))
            using (var b = U.Ready(U.Connect(srv.Addr)))
            {
                var e = U.Throws<NotHeldException>(() => b.ReleaseTokenAsync("k", 1));
                Assert.IsInstanceOf<NotHeldAfterRetryException>(e, e.Message);
                StringAssert.Contains("earlier attempt", e.Message);
                Assert.AreEqual(2, srv.Count(FrameType.Release));
                e = U.Throws<NotHeldException>(() => b.ReleaseTokenAsync("k", 2));
                Assert.IsNotInstanceOf<NotHeldAfterRetryException>(e, "N to a first attempt: " + e.Message);
            }
        }

        [Test]
        public void Rule6_ReleaseWithoutAnswerIsAnError()
        {
            using (var srv = new FakeServer(c => { c.Hello(); c.Ready(60000); c.Expect(FrameType.Release); c.ClosedByClient(120000); }))
            using (var b = U.Ready(U.Builder(srv.Addr).ReleaseBoundForTests(U.Ms(300)).Connect()))
            {
                var e = U.Throws<IndeterminateException>(() => b.ReleaseTokenAsync("k", 7));
                StringAssert.Contains("outcome unknown", e.Message);
            }
        }

        [Test]
        public void Rule6_ReleaseSentThenNoConnectionIsIndeterminate()
        {
            // The release reaches the server, the connection drops, and no new
            // session comes up within the bound: the outcome is unknown, not "unavailable".
            using (var srv = new FakeServer(
                c => { c.Hello(); c.Ready(); c.Expect(FrameType.Release); c.Close(); },
                c => { c.Hello(); c.ClosedByClient(120000); }))
            using (var b = U.Ready(U.Builder(srv.Addr).ReleaseBoundForTests(U.Ms(500)).Connect()))
            {
                var e = U.Throws<IndeterminateException>(() => b.ReleaseTokenAsync("k", 7));
                StringAssert.Contains("outcome unknown", e.Message);
            }
        }

        [Test]
        public void Rule6_ReleaseWithoutConnectionIsUnavailable()
        {
            using (var b = U.Builder("127.0.0.1:1").ReleaseBoundForTests(U.Ms(300)).Connect())
            {
                var e = U.Throws<UnavailableException>(() => b.ReleaseTokenAsync("k", 7));
                StringAssert.Contains("not sent", e.Message);
            }
        }

        // ---------- Rule 7: the conservative deadline and the work budget ----------

        [Test]
        public void Rule7_ConservativeDeadlineFormula()
        {
            long f = Stopwatch.Frequency;
            // (30 000 + 1 000) ms × 0.99 − 100 ms = 30 590 ms after the send.
            long d = TicketBroker.ConservativeDeadline(1000, 30000, 1000);
            Assert.AreEqual(30590.0, (d - 1000) * 1000.0 / f, 0.01);
            Assert.AreEqual(0.0, TicketBroker.ConservativeDeadline(0, 0, 0) * 1000.0 / f + 100, 0.01);
        }

        [Test]
        public void Rule7_DeadlineMeasuredFromSend()
        {
            var got = new ManualResetEventSlim();
            var grant = new ManualResetEventSlim();
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready();
                var a = c.Expect(FrameType.Acquire);
                got.Set();
                grant.Wait(U.Patience);
                c.Send(new Frame { Type = FrameType.Granted, Id = a.Id, Token = 3, LeaseMs = 10000 });
                c.ClosedByClient(120000);
            }))
            using (var b = U.Ready(U.Connect(srv.Addr)))
            {
                var t = b.AcquireAsync("k", S, TimeSpan.FromSeconds(10), TimeSpan.Zero);
                Assert.IsTrue(got.Wait(U.Patience));
                var held = Stopwatch.StartNew();
                U.WaitUntil("the grant has been held back for 500 ms", () => held.ElapsedMilliseconds >= 500);
                grant.Set();
                var tk = U.Get(t);
                // From the arrival it would be 9 800 ms; from the send it is at least 500 ms less.
                Assert.Less(tk.Remaining, U.Ms(9800 - 500), "the deadline is not measured from the send");
                Assert.Greater(tk.Remaining, TimeSpan.Zero);
            }
        }

        [Test]
        public void Rule7_GrantTooLateForBudgetIsReleased()
        {
            var obs = new U.Observed();
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready();
                var a = c.Expect(FrameType.Acquire);
                c.Send(new Frame { Type = FrameType.Granted, Id = a.Id, Token = 9, LeaseMs = 1000 });
                var l = c.Expect(FrameType.Release);
                c.Send(new Frame { Type = l.Token == 9 ? FrameType.Released : FrameType.NotHeld, Id = l.Id });
                c.ClosedByClient(120000);
            }))
            using (var b = U.Ready(U.Builder(srv.Addr).ReleaseObserver(obs.Report).Connect()))
            {
                // A 1 s grant of a 30 s request (the server may grant less) leaves at most 0.89 s:
                // enough for 0.5 s, but the budget rounds up to 1 s.
                var e = U.Throws<BudgetExceededException>(() => b.AcquireAsync("k", S, TimeSpan.FromSeconds(30), U.Ms(500)));
                Assert.AreEqual(9UL, e.Token);
                StringAssert.Contains("do not enter the critical section", e.Message);
                U.WaitUntil("the too-late grant is released", () => obs.Has("k/9/ok"));
            }
        }

        // ---------- Rule 8: Dispose is a bounded best-effort background release ----------

        [Test]
        public void Rule8_DisposeReleasesInBackground()
        {
            var obs = new U.Observed();
            var gotRelease = new ManualResetEventSlim();
            var answer = new ManualResetEventSlim();
            var table = new LockTable();
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready();
                var a = c.Expect(FrameType.Acquire);
                c.Send(table.Answer(a));
                var l = c.Expect(FrameType.Release);
                gotRelease.Set();
                answer.Wait(U.Patience);
                c.Send(table.Answer(l));
                c.Serve(table);
            }))
            using (var b = U.Ready(U.Builder(srv.Addr).ReleaseObserver(obs.Report).Connect()))
            {
                var t = U.Get(b.AcquireAsync("k", S, S, TimeSpan.Zero));
                using (t)
                {
                    // the protected work
                }
                // Dispose returned although the server has not answered (it waits for us).
                Assert.IsTrue(gotRelease.Wait(U.Patience));
                Assert.AreEqual(0, obs.Events.Count);
                answer.Set();
                U.WaitUntil("the background release is reported", () => obs.Has("k/" + t.Token + "/ok"));
                t.Dispose(); // a second Dispose does nothing
                U.Wait(t.ReleaseAsync()); // reports the background release's outcome
                Assert.AreEqual(1, srv.Count(FrameType.Release));
            }
        }

        [Test]
        public void Rule8_FullQueueDropsAndReports()
        {
            var obs = new U.Observed();
            var answer = new ManualResetEventSlim();
            var table = new LockTable();
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready();
                for (;;)
                {
                    var f = c.Next(120000);
                    if (f.Type == FrameType.Release) answer.Wait(U.Patience);
                    c.Send(table.Answer(f));
                }
            }))
            using (var b = U.Ready(U.Builder(srv.Addr).ReleaseQueue(1).WorkersForTests(1).ReleaseObserver(obs.Report).Connect()))
            {
                var ta = U.Get(b.AcquireAsync("a", S, S, TimeSpan.Zero));
                var tb = U.Get(b.AcquireAsync("b", S, S, TimeSpan.Zero));
                var tc = U.Get(b.AcquireAsync("c", S, S, TimeSpan.Zero));
                ta.Dispose(); // taken by the one worker, whose release waits for the server
                U.WaitUntil("the first release reached the server", () => srv.Count(FrameType.Release) == 1);
                tb.Dispose(); // fills the queue
                tc.Dispose(); // dropped
                Assert.IsTrue(obs.Has("c/" + tc.Token + "/ReleaseDroppedException"), obs.ToString());
                U.Throws<ReleaseDroppedException>(() => tc.ReleaseAsync());
                answer.Set();
                U.WaitUntil("the queued releases finish", () => obs.Has("a/" + ta.Token + "/ok") && obs.Has("b/" + tb.Token + "/ok"));
            }
        }

        // ---------- Rule 9: not acquired is its own outcome ----------

        [Test]
        public void Rule9_NotAcquiredIsDistinct()
        {
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready();
                var a = c.Expect(FrameType.Acquire);
                c.Send(new Frame { Type = FrameType.Queued, Id = a.Id, Count = 1 });
                c.Send(new Frame { Type = FrameType.NotAcquired, Id = a.Id, QueuedMs = 1000 });
                a = c.Expect(FrameType.Acquire);
                c.Send(new Frame { Type = FrameType.NotAcquired, Id = a.Id });
                a = c.Expect(FrameType.Acquire);
                c.Send(new Frame { Type = FrameType.Cancelled, Id = a.Id });
                c.ClosedByClient();
            }))
            using (var b = U.Ready(U.Connect(srv.Addr)))
            {
                StringAssert.Contains("within the wait of 1 s", U.Throws<NotAcquiredException>(() => b.AcquireAsync("k", S, S, TimeSpan.Zero)).Message);
                StringAssert.Contains("one immediate attempt", U.Throws<NotAcquiredException>(() => b.AcquireAsync("k", TimeSpan.Zero, S, TimeSpan.Zero)).Message);
                StringAssert.Contains("cancelled", U.Throws<NotAcquiredException>(() => b.AcquireAsync("k", S, S, TimeSpan.Zero)).Message);
            }
        }

        [Test]
        public void QueuedThenGranted()
        {
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready();
                var a = c.Expect(FrameType.Acquire);
                c.Send(new Frame { Type = FrameType.Queued, Id = a.Id, Count = 2 });
                c.Send(new Frame { Type = FrameType.Granted, Id = a.Id, Token = 12, LeaseMs = 5000, QueuedMs = 700 });
                c.ClosedByClient();
            }))
            using (var b = U.Ready(U.Connect(srv.Addr)))
            {
                var t = U.Get(b.AcquireAsync("k", TimeSpan.FromSeconds(5), TimeSpan.FromSeconds(5), TimeSpan.Zero));
                Assert.AreEqual(12UL, t.Token);
                Assert.AreEqual(U.Ms(700), t.Queued);
                Assert.AreEqual(U.Ms(5000), t.Lease);
                Assert.AreEqual("k", t.Key);
            }
        }
    }
}
