using System;
using System.Collections.Generic;
using System.Linq;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;
using Ticketing.Wire;

namespace Ticketing.Tests
{
    /// <summary>
    /// Ticket.Dispose (using): a bounded, best-effort release in the
    /// background, reported to the release observer: its outcome, a full
    /// queue, a refusal.
    /// </summary>
    [TestFixture]
    public class DisposeTests
    {
        static readonly TimeSpan S = U.S;

        [Test]
        public void DisposeReleasesInBackground()
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
        public void AFullQueueDropsAndReports()
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

        [Test]
        public void ARefusedReleaseIsThrownOrReportedAndNotRetried()
        {
            var table = new LockTable();
            var obs = new U.Observed();
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready();
                for (;;)
                {
                    var f = c.Next(120000);
                    c.Send(f.Type == FrameType.Release
                        ? new Frame { Type = FrameType.Forbidden, Id = f.Id, Reason = (byte)PermissionReason.Owner }
                        : table.Answer(f));
                }
            }))
            using (var b = U.Ready(U.Builder(srv.Addr).ReleaseObserver(obs.Report).Connect()))
            {
                // Thrown by ReleaseAsync; reported to the observer by the background
                // release of Dispose; each sent once.
                var held = U.Get(b.AcquireAsync("deny/1", TimeSpan.Zero, S, TimeSpan.Zero));
                Assert.AreEqual(PermissionReason.Owner, U.Throws<PermissionDeniedException>(() => held.ReleaseAsync()).Reason);
                var held2 = U.Get(b.AcquireAsync("deny/2", TimeSpan.Zero, S, TimeSpan.Zero));
                held2.Dispose();
                U.WaitUntil("the background release's refusal reaches the observer", () => obs.Has("deny/2/" + held2.Token + "/PermissionDeniedException"));
                Assert.AreEqual(2, srv.Count(FrameType.Release), "a release answered F was sent again");
                Assert.AreEqual(1, srv.Accepted, "a refusal ended the connection");
            }
        }
    }
}
