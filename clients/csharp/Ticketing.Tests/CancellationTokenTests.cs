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
    /// A CancellationToken already cancelled when a call is made: the call
    /// ends cancelled and sends nothing, for every kind of call. (Cancelling
    /// while a call waits, and after it was sent, are conformance scenarios.)
    /// </summary>
    [TestFixture]
    public class CancellationTokenTests
    {
        static readonly TimeSpan S = U.S;

        [Test]
        public void AnAlreadyCancelledTokenSendsNothing()
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
        }
    }
}
