using System;
using System.Collections.Generic;
using System.Text;
using NUnit.Framework;
using Ticketing.Wire;

namespace Ticketing.Tests
{
    /// <summary>The broker's events, in the order a logger sees them.</summary>
    [TestFixture]
    public class EventTests
    {
        static readonly TimeSpan S = U.S;

        [Test]
        public void ReconnectsLeaderChangesAndReleaseFailuresAreReported()
        {
            var seen = new List<string>();
            Action<string> note = s => { lock (seen) seen.Add(s); };
            var table = new LockTable();
            var subscribed = new System.Threading.ManualResetEventSlim();
            using (var next = new FakeServer(FakeServer.Normal(table)))
            using (var old = new FakeServer(c =>
            {
                c.Hello();
                subscribed.Wait(U.Patience); // the broker connects at once: the handlers first
                c.Ready(node: "old");
                c.Expect(FrameType.Describe);
                c.Send(new Frame { Type = FrameType.NotLeader, Text = Encoding.UTF8.GetBytes(next.Addr) });
                c.ClosedByClient();
            }))
            {
                var b = U.Connect(old.Addr);
                b.Connected += (s, e) => note("connected " + (e.Address == old.Addr ? "old" : "next") + " " + e.NodeId + (e.Reconnect ? " again" : ""));
                b.Disconnected += (s, e) => note("disconnected " + (e.Address == old.Addr ? "old" : "next") + " hint " + (e.LeaderHint == next.Addr ? "next" : e.LeaderHint));
                b.LeaderChanged += (s, e) => note("leader " + (e.PreviousAddress == old.Addr ? "old" : "?") + " -> " + (e.Address == next.Addr ? "next" : "?"));
                b.ReleaseFailed += (s, e) => note("release failed " + e.Key + "/" + e.Token + " " + e.Exception.GetType().Name);
                b.ReleaseFailed += (s, e) => { throw new InvalidOperationException("a handler that throws is ignored"); };
                subscribed.Set();
                using (b)
                {
                    U.Ready(b);
                    U.Ended<UnavailableException>(b.DescribeAsync("k"));
                    U.Get(b.DescribeAsync("k"));
                    // A ticket that expired meanwhile: its background release is answered N.
                    var t = U.Get(b.AcquireAsync("k", S, S, TimeSpan.Zero));
                    lock (table) table.Held.Remove("k");
                    t.Dispose();
                    U.WaitUntil("the release failure is reported", () => { lock (seen) return seen.Count >= 5; });
                }
            }
            lock (seen)
                CollectionAssert.AreEqual(new[]
                {
                    "connected old old",
                    "disconnected old hint next",
                    "connected next fake again",
                    "leader old -> next",
                    "release failed k/" + table.Last + " NotHeldException",
                }, seen);
        }
    }
}
