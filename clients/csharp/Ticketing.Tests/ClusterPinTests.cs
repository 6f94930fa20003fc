using System;
using System.Threading;
using NUnit.Framework;

namespace Ticketing.Tests
{
    /// <summary>
    /// Real ticketd processes: a client of a three-server cluster A whose
    /// address list also names a lone server of cluster B (its own data
    /// directory, as a wiped server restarted as a new cluster would be). With
    /// A down, the client refuses B, naming both cluster IDs, and B grants it
    /// nothing.
    /// </summary>
    [TestFixture]
    public class ClusterPinTests
    {
        [Test]
        public void AServerOfAnotherClusterIsRefused()
        {
            using (var a = new Cluster(3))
            using (var lone = new Cluster(1))
            {
                a.LeaderIndex();
                lone.LeaderIndex();
                string idA = a.ClusterId(), idB = lone.ClusterId();
                Assert.AreNotEqual(idA, idB);

                using (var b = U.Builder(a.AddrList + "," + lone.AddrList).OperationTimeout(TimeSpan.FromSeconds(10)).Connect())
                using (var gone = new ManualResetEventSlim())
                {
                    U.Get(b.AcquireAsync("orders/42", TimeSpan.Zero, TimeSpan.FromSeconds(250), TimeSpan.Zero));
                    Assert.AreEqual(idA, b.ClusterId, "the client pins the cluster it reached first");
                    b.Disconnected += (s, e) => gone.Set();
                    for (int i = 0; i < 3; i++) a.Kill(i);
                    // A call made before the broker saw its session end would be sent on it (and be indeterminate).
                    Assert.IsTrue(gone.Wait(U.Patience), "the broker did not notice that cluster A was killed");
                    foreach (var key in new[] { "orders/42", "orders/43" })
                    {
                        var e = U.Throws<WrongClusterException>(() => b.AcquireAsync(key, TimeSpan.Zero, TimeSpan.FromSeconds(30), TimeSpan.Zero));
                        Assert.AreEqual(idA, e.PinnedClusterId);
                        Assert.AreEqual(idB, e.ServerClusterId);
                        StringAssert.Contains(idA, e.Message);
                        StringAssert.Contains(idB, e.Message);
                    }
                }

                // Given A's ID, a client whose only server is B refuses it at once.
                using (var pinned = U.Builder(lone.AddrList).ClusterId(idA).Connect())
                {
                    var e = U.Throws<WrongClusterException>(() => pinned.WaitReadyAsync(TimeSpan.FromSeconds(20)));
                    StringAssert.Contains(idB, e.Message);
                }

                // B never granted anything: an unpinned client's grant there is the first of B's sequence.
                using (var fresh = U.Connect(lone.AddrList))
                {
                    var t = U.Get(fresh.AcquireAsync("orders/42", TimeSpan.Zero, TimeSpan.FromSeconds(30), TimeSpan.Zero));
                    Assert.AreEqual(1UL, t.Token, "the lone server had granted tokens before");
                    Assert.AreEqual(idB, fresh.ClusterId);
                }
            }
        }

        [Test]
        public void AClusterIdThatIsNotOneIsRefusedByTheBuilder()
        {
            foreach (var id in new[] { "n1", new string('a', 31), new string('0', 32), new string('g', 32) })
            {
                var e = Assert.Throws<ArgumentException>(() => TicketBroker.CreateBuilder().ClusterId(id));
                StringAssert.Contains("32 hex digits", e.Message);
                Assert.AreEqual("clusterId", e.ParamName);
            }
        }
    }
}
