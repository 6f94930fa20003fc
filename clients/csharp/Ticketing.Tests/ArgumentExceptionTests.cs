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
    /// .NET's conventions for invalid arguments: the call itself throws (a
    /// usage error, not a faulted task), an ArgumentException whose ParamName
    /// names the argument, ArgumentOutOfRangeException for a value out of
    /// range, ArgumentNullException for null. Which arguments are invalid is
    /// a conformance scenario (invalid-arguments-are-refused-before-sending).
    /// </summary>
    [TestFixture]
    public class ArgumentExceptionTests
    {
        static readonly TimeSpan S = U.S;

        [Test]
        public void InvalidArgumentsThrowFromTheCallNamingTheParameter()
        {
            var table = new LockTable();
            using (var srv = new FakeServer(FakeServer.Normal(table)))
            using (var b = U.Ready(U.Connect(srv.Addr)))
            {
                var cases = new[]
                {
                    new object[] { "empty key", "", S, S, TimeSpan.Zero },
                    new object[] { "key over 1024 bytes", new string('k', 1025), S, S, TimeSpan.Zero },
                    new object[] { "wait over 255 s by one tick", "k", TimeSpan.FromSeconds(255) + TimeSpan.FromTicks(1), S, TimeSpan.Zero },
                    new object[] { "negative wait", "k", TimeSpan.FromTicks(-1), S, TimeSpan.Zero },
                    new object[] { "zero lease", "k", TimeSpan.Zero, TimeSpan.Zero, TimeSpan.Zero },
                    new object[] { "negative budget", "k", TimeSpan.Zero, S, TimeSpan.FromTicks(-1) },
                    new object[] { "budget over the rounded lease", "k", TimeSpan.Zero, U.Ms(500), U.Ms(1500) },
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
                Assert.AreEqual(0, srv.Count(FrameType.Acquire) + srv.Count(FrameType.Describe) + srv.Count(FrameType.Release));
            }
        }
    }
}
