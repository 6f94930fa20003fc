using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;
using Ticketing.Wire;

namespace Ticketing.Tests
{
    /// <summary>The broker's connection handling against the fake server.</summary>
    [TestFixture]
    public class BrokerTests
    {
        static readonly TimeSpan S = U.S;

        [Test]
        public void HelloCarriesVersionAndToken()
        {
            var table = new LockTable();
            using (var srv = new FakeServer(FakeServer.Normal(table)))
            using (var b = U.Ready(U.Builder(srv.Addr).Token("s3cret-token").Connect()))
            {
                var h = srv.Received.First();
                Assert.AreEqual(FrameType.Hello, h.Type);
                Assert.AreEqual(1, h.Version);
                Assert.AreEqual(Codec.HelloClusterId | Codec.HelloIdlePings, h.Flags, "a client hello asks for the cluster ID and idle pings, never for an admin session");
                Assert.AreEqual("s3cret-token", Encoding.UTF8.GetString(h.Text));
            }
        }

        [Test]
        public void TriesTheListedAddressesInTurn()
        {
            var table = new LockTable();
            using (var srv = new FakeServer(FakeServer.Normal(table)))
            using (var b = U.Ready(U.Connect("127.0.0.1:1," + srv.Addr)))
            {
                var t = U.Get(b.AcquireAsync("k", S, S, TimeSpan.Zero));
                U.Wait(t.ReleaseAsync());
                Assert.AreEqual(1, srv.Accepted);
            }
        }

        [Test]
        public void ManyThreadsShareOneConnection()
        {
            var table = new LockTable();
            using (var srv = new FakeServer(FakeServer.Normal(table)))
            using (var b = U.Ready(U.Connect(srv.Addr)))
            {
                const int n = 200;
                var tasks = Enumerable.Range(0, n).Select(i => Task.Run(async () =>
                {
                    var t = await b.AcquireAsync("key/" + i, S, S, TimeSpan.Zero);
                    await t.ReleaseAsync();
                    return t.Token;
                })).ToArray();
                U.Wait(Task.WhenAll(tasks));
                Assert.AreEqual(n, tasks.Select(t => t.Result).Distinct().Count());
                Assert.AreEqual(1, srv.Accepted, "more than one connection");
                Assert.AreEqual(n, srv.Count(FrameType.Acquire));
                Assert.AreEqual(n, srv.Count(FrameType.Release));
            }
        }

        [Test]
        public void UnauthenticatedIsReportedPromptly()
        {
            using (var srv = new FakeServer(c => { c.Hello(); c.SendError(ErrorCode.Unauthenticated, "wrong token"); }))
            using (var b = U.Builder(srv.Addr).Token("bad").Connect())
            {
                var e = U.Throws<UnauthenticatedException>(() => b.WaitReadyAsync(TimeSpan.FromMinutes(10)));
                StringAssert.Contains("wrong token", e.Message);
                var a = U.Throws<UnauthenticatedException>(() => b.AcquireAsync("k", S, S, TimeSpan.Zero));
                StringAssert.Contains("not sent", a.Message);
                Assert.AreEqual(0, srv.Count(FrameType.Acquire));
                U.WaitUntil("the broker keeps retrying", () => srv.Accepted >= 2);
            }
        }

        [Test]
        public void PersistentRefusalsAreReportedPromptly()
        {
            using (var srv = new FakeServer(c => { c.Hello(); c.SendError(ErrorCode.UnsupportedVersion, "version 1 not supported"); }))
            using (var b = U.Connect(srv.Addr))
            {
                var e = U.Throws<UnavailableException>(() => b.WaitReadyAsync(TimeSpan.FromMinutes(10)));
                Assert.AreEqual(ErrorCode.UnsupportedVersion, e.ServerCode);
            }
            using (var srv = new FakeServer(c => { c.Send(new Frame { Type = FrameType.Capacity, Reason = (byte)CapacityReason.Connections }); }))
            using (var b = U.Connect(srv.Addr))
            {
                var e = U.Throws<CapacityException>(() => b.WaitReadyAsync(TimeSpan.FromMinutes(10)));
                Assert.AreEqual(CapacityReason.Connections, e.Reason);
            }
            // A peer that does not speak the protocol.
            using (var srv = new FakeServer(c => { c.Hello(); c.SendRaw(Encoding.ASCII.GetBytes("HTTP/1.1 400 Bad Request\r\n\r\n")); }))
            using (var b = U.Connect(srv.Addr))
            {
                var e = U.Throws<UnavailableException>(() => b.WaitReadyAsync(TimeSpan.FromMinutes(10)));
                StringAssert.Contains("Ticketing server", e.Message);
            }
        }

        [Test]
        public void WaitReadyTimeoutSaysWhatTheLastAttemptRanInto()
        {
            using (var b = U.Connect("127.0.0.1:1"))
            {
                var e = U.Throws<UnavailableException>(() => b.WaitReadyAsync(U.Ms(300)));
                StringAssert.Contains("cannot connect to 127.0.0.1:1", e.Message);
                var cts = new CancellationTokenSource(50);
                U.Throws<OperationCanceledException>(() => b.WaitReadyAsync(cts.Token));
            }
        }

        [Test]
        public void PingAnsweredWithPong()
        {
            var pong = new ManualResetEventSlim();
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready();
                c.Send(new Frame { Type = FrameType.Ping, Nonce = 0x0123456789abcdefUL });
                var f = c.Recv();
                if (f.Type == FrameType.Pong && f.Nonce == 0x0123456789abcdefUL) pong.Set();
                c.ClosedByClient(120000);
            }))
            using (var b = U.Ready(U.Connect(srv.Addr)))
            {
                Assert.IsTrue(pong.Wait(U.Patience), "no pong with the ping's nonce");
            }
        }

        [Test]
        public void InFlightLimitRespected()
        {
            var release = new ManualResetEventSlim();
            var table = new LockTable();
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready(5000, 2);
                var held = new List<Frame> { c.Expect(FrameType.Acquire), c.Expect(FrameType.Acquire) };
                release.Wait(U.Patience);
                foreach (var a in held) c.Send(table.Answer(a));
                for (;;)
                {
                    var f = c.Next(120000);
                    c.Send(table.Answer(f));
                }
            }))
            using (var b = U.Ready(U.Connect(srv.Addr)))
            {
                var tasks = Enumerable.Range(0, 5).Select(i => b.AcquireAsync("k" + i, S, S, TimeSpan.Zero)).ToArray();
                U.WaitUntil("three callers wait for a slot and two acquires reached the server",
                    () => b.CurrentForTests.SlotWaiters == 3 && srv.Count(FrameType.Acquire) >= 2);
                Assert.AreEqual(2, srv.Count(FrameType.Acquire), "more requests in flight than the server allows");
                release.Set();
                U.Wait(Task.WhenAll(tasks));
                Assert.AreEqual(5, srv.Count(FrameType.Acquire));
            }
        }

        [Test]
        public void InFlightClassesAreSeparate()
        {
            // Y count 1: one acquire and, separately, one other request may be in flight.
            var answer = new ManualResetEventSlim();
            var table = new LockTable();
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready(5000, 1);
                var a = c.Expect(FrameType.Acquire);
                for (;;)
                {
                    var f = c.Next(120000);
                    if (f.Type == FrameType.Acquire) { c.Send(table.Answer(f)); continue; }
                    c.Send(table.Answer(f));
                    if (f.Type == FrameType.Release) { answer.Wait(U.Patience); c.Send(new Frame { Type = FrameType.NotAcquired, Id = a.Id }); }
                }
            }))
            using (var b = U.Ready(U.Connect(srv.Addr)))
            {
                var first = b.AcquireAsync("held-back", S, S, TimeSpan.Zero);
                U.WaitUntil("the server has the first acquire", () => srv.Count(FrameType.Acquire) == 1);
                // The acquire pool is full; describe and release still go out.
                var second = b.AcquireAsync("second", S, S, TimeSpan.Zero);
                U.WaitUntil("the second acquire waits for an acquire slot", () => b.CurrentForTests.SlotWaiters == 1);
                Assert.IsFalse(U.Get(b.DescribeAsync("x")).Held);
                U.Throws<NotHeldException>(() => b.ReleaseTokenAsync("x", 5));
                Assert.AreEqual(1, srv.Count(FrameType.Acquire));
                answer.Set();
                U.Ended<NotAcquiredException>(first);
                U.Wait(U.Get(second).ReleaseAsync());
            }
        }

        [Test]
        public void DescribeReportsTheKeyState()
        {
            var owner = VectorTests.Hex("00112233445566778899aabbccddeeff");
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready();
                var d = c.Expect(FrameType.Describe);
                c.Send(new Frame { Type = FrameType.Info, Id = d.Id, Flags = 1, Token = 42, Owner = owner, RemainingMs = 29000, LeaseMs = 30000, Count = 2 });
                d = c.Expect(FrameType.Describe);
                c.Send(new Frame { Type = FrameType.Info, Id = d.Id });
                c.ClosedByClient();
            }))
            using (var b = U.Ready(U.Connect(srv.Addr)))
            {
                var k = U.Get(b.DescribeAsync("orders/42"));
                Assert.IsTrue(k.Held);
                Assert.AreEqual(42UL, k.Token);
                CollectionAssert.AreEqual(owner, k.Owner.ToArray());
                Assert.AreEqual(U.Ms(29000), k.Remaining);
                Assert.AreEqual(U.Ms(30000), k.Lease);
                Assert.AreEqual(2, k.Waiters);
                Assert.AreEqual("orders/42", k.Key);
                k = U.Get(b.DescribeAsync("free"));
                Assert.IsFalse(k.Held);
                Assert.AreEqual(0UL, k.Token);
            }
        }

        [Test]
        public void CloseEndsPendingCalls()
        {
            var got = new ManualResetEventSlim();
            var obs = new U.Observed();
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready();
                c.Expect(FrameType.Acquire);
                got.Set();
                c.ClosedByClient(120000);
            }))
            {
                var b = U.Ready(U.Builder(srv.Addr).ReleaseObserver(obs.Report).DrainForTests(U.Ms(200)).Connect());
                var pending = b.AcquireAsync("k", TimeSpan.FromSeconds(60), S, TimeSpan.Zero);
                Assert.IsTrue(got.Wait(U.Patience));
                U.Wait(b.CloseAsync());
                var e = U.Ended<IndeterminateException>(pending);
                Assert.IsTrue(e.BrokerClosed);
                U.Throws<ClosedException>(() => b.AcquireAsync("k", S, S, TimeSpan.Zero));
                U.Throws<ClosedException>(() => b.WaitReadyAsync(S));
                U.Throws<ClosedException>(() => b.DescribeAsync("k"));
                b.Dispose(); // a second close is fine
            }
        }

        [Test]
        public void CloseCancelsWaitingAcquiresAndReleasesLateGrants()
        {
            var obs = new U.Observed();
            var got = new ManualResetEventSlim();
            string problem = null;
            using (var srv = new FakeServer(c =>
            {
                c.Hello(); c.Ready();
                var a = c.Expect(FrameType.Acquire);
                got.Set();
                var x = c.Expect(FrameType.Cancel);
                if (x.Id != a.Id) problem = "the cancel names another request";
                // The grant raced with the cancel: the closing broker must still release it.
                c.Send(new Frame { Type = FrameType.Granted, Id = a.Id, Token = 31, LeaseMs = 30000 });
                var l = c.Expect(FrameType.Release);
                c.Send(new Frame { Type = l.Token == 31 ? FrameType.Released : FrameType.NotHeld, Id = l.Id });
                c.ClosedByClient(120000);
            }))
            {
                var b = U.Ready(U.Builder(srv.Addr).ReleaseObserver(obs.Report).Connect());
                var pending = b.AcquireAsync("k", TimeSpan.FromSeconds(60), TimeSpan.FromSeconds(30), TimeSpan.Zero);
                Assert.IsTrue(got.Wait(U.Patience));
                var closing = b.CloseAsync();
                var e = U.Ended<IndeterminateException>(pending);
                Assert.IsTrue(e.BrokerClosed);
                StringAssert.Contains("a cancel was sent", e.Message);
                U.Wait(closing);
                Assert.IsTrue(obs.Has("k/31/ok"), "the grant that raced with the close was not released: " + obs);
                Assert.IsNull(problem, problem);
            }
        }

        [Test]
        public void CloseWakesWaitReadyAndCallsWithoutConnection()
        {
            var b = U.Connect("127.0.0.1:1");
            var w = b.WaitReadyAsync(TimeSpan.FromMinutes(10));
            var a = b.AcquireAsync("k", S, S, TimeSpan.Zero);
            b.Dispose();
            U.Ended<ClosedException>(w);
            U.Ended<ClosedException>(a);
        }

        static void Param<TEx>(string param, TestDelegate code) where TEx : ArgumentException
        {
            var e = Assert.Catch<ArgumentException>(code);
            Assert.IsInstanceOf<TEx>(e);
            Assert.AreEqual(param, e.ParamName, e.Message);
        }

        [Test]
        public void ConfigurationErrors()
        {
            Param<ArgumentException>("addresses", () => TicketBroker.Connect(""));
            Param<ArgumentNullException>("addresses", () => TicketBroker.Connect(null));
            Param<ArgumentException>("addresses", () => TicketBroker.Connect("no-port"));
            Param<ArgumentException>("addresses", () => TicketBroker.Connect("h:99999"));
            Assert.Throws<InvalidOperationException>(() => TicketBroker.CreateBuilder().Connect());
            Param<ArgumentException>("token", () => TicketBroker.CreateBuilder().Token(new string('t', 1025)));
            Param<ArgumentOutOfRangeException>("capacity", () => TicketBroker.CreateBuilder().ReleaseQueue(0));
            Param<ArgumentOutOfRangeException>("timeout", () => TicketBroker.CreateBuilder().DialTimeout(TimeSpan.Zero));
            Param<ArgumentOutOfRangeException>("timeout", () => TicketBroker.CreateBuilder().OperationTimeout(TimeSpan.FromTicks(-5)));
            Param<ArgumentNullException>("caFile", () => TlsMode.Ca(null));
            Param<ArgumentException>("caFile", () => TicketBroker.CreateBuilder().Addresses("127.0.0.1:5225").Tls(TlsMode.Ca("/nonexistent/ca.crt")).Connect());
            Assert.Throws<InvalidOperationException>(() => TlsMode.Off.WithClientCert("x.p12", ""));
            Param<ArgumentException>("pkcs12File", () => TicketBroker.CreateBuilder().Addresses("127.0.0.1:5225").Tls(TlsMode.InsecureSkipVerify.WithClientCert("/nonexistent.p12", "")).Connect());
            var tmp = Path.GetTempFileName();
            try
            {
                File.WriteAllText(tmp, "not a certificate");
                Param<ArgumentException>("caFile", () => TicketBroker.CreateBuilder().Addresses("127.0.0.1:5225").Tls(TlsMode.Ca(tmp)).Connect());
            }
            finally { File.Delete(tmp); }
            using (var b = TicketBroker.CreateBuilder().Addresses("127.0.0.1:1, [::1]:2", "127.0.0.1:3").Connect())
            {
                Param<ArgumentOutOfRangeException>("timeout", () => b.WaitReadyAsync(TimeSpan.FromSeconds(-1)));
            }
        }

        /// <summary>The .NET design rules the public surface keeps: no public constants, no arrays in properties, standard exception constructors, documented parameter names.</summary>
        [Test]
        public void PublicSurfaceFollowsTheDotNetGuidelines()
        {
            var asm = typeof(TicketBroker).Assembly;
            var cls = (CLSCompliantAttribute)Attribute.GetCustomAttribute(asm, typeof(CLSCompliantAttribute));
            Assert.IsNotNull(cls, "no [assembly: CLSCompliant]");
            Assert.IsFalse(cls.IsCompliant);
            foreach (var t in asm.GetExportedTypes())
            {
                // Former names kept as [Obsolete] aliases are exempt; each names a member that exists.
                var former = new HashSet<string>();
                foreach (var m in t.GetMembers())
                {
                    var o = (ObsoleteAttribute)Attribute.GetCustomAttribute(m, typeof(ObsoleteAttribute));
                    if (o == null || m.DeclaringType.Assembly != asm) continue;
                    former.Add(m.Name);
                    var renamed = System.Text.RegularExpressions.Regex.Match(o.Message ?? "", "^Renamed (\\w+)");
                    Assert.IsTrue(renamed.Success, t.Name + "." + m.Name + ": the [Obsolete] message does not name the new member: " + o.Message);
                    Assert.IsNotEmpty(t.GetMember(renamed.Groups[1].Value), t.Name + "." + m.Name + " names a member that does not exist: " + renamed.Groups[1].Value);
                }
                Func<System.Reflection.MemberInfo, bool> current = m =>
                    !former.Contains(m.Name) && !(m.Name.Length > 4 && (m.Name.StartsWith("get_") || m.Name.StartsWith("set_")) && former.Contains(m.Name.Substring(4)));
                foreach (var f in t.GetFields(System.Reflection.BindingFlags.Public | System.Reflection.BindingFlags.Static | System.Reflection.BindingFlags.Instance))
                    if (!t.IsEnum) Assert.IsFalse(f.IsLiteral, t.Name + "." + f.Name + " is a public const callers would bake in");
                foreach (var p in t.GetProperties())
                    Assert.IsFalse(p.PropertyType.IsArray, t.Name + "." + p.Name + " exposes a mutable array");
                foreach (var m in t.GetMethods().Where(m => current(m)))
                    foreach (var p in m.GetParameters())
                    {
                        if (p.ParameterType == typeof(System.Threading.CancellationToken))
                            Assert.AreEqual("cancellationToken", p.Name, t.Name + "." + m.Name);
                        StringAssert.DoesNotContain("Addr", p.Name.Replace("Address", ""), t.Name + "." + m.Name + " abbreviates: " + p.Name);
                    }
                foreach (var m in t.GetMembers().Where(current))
                    StringAssert.DoesNotContain("Addr", m.Name.Replace("Address", ""), t.Name + "." + m.Name + " abbreviates");
                if (typeof(Exception).IsAssignableFrom(t))
                {
                    Assert.IsNotNull(t.GetConstructor(Type.EmptyTypes), t.Name + "()");
                    Assert.IsNotNull(t.GetConstructor(new[] { typeof(string) }), t.Name + "(string)");
                    Assert.IsNotNull(t.GetConstructor(new[] { typeof(string), typeof(Exception) }), t.Name + "(string, Exception)");
                }
            }
            Assert.IsTrue(typeof(IAsyncDisposable).IsAssignableFrom(typeof(Ticket)));
            Assert.IsTrue(typeof(IAsyncDisposable).IsAssignableFrom(typeof(TicketBroker)));
            foreach (var t in new[] { typeof(Coordination.CoordinationClient), typeof(Coordination.CoordinationSession), typeof(Coordination.SemaphoreLease) })
                Assert.IsTrue(typeof(IAsyncDisposable).IsAssignableFrom(t), t.Name);
        }

        [Test]
        public void ExceptionsAreDistinctTypes()
        {
            var types = new[] { typeof(NotAcquiredException), typeof(CapacityException), typeof(IndeterminateException), typeof(NotHeldException),
                typeof(UnauthenticatedException), typeof(UnavailableException), typeof(ClosedException),
                typeof(BudgetExceededException), typeof(ReleaseDroppedException) };
            foreach (var t in types)
            {
                Assert.IsTrue(typeof(TicketingException).IsAssignableFrom(t), t.Name);
                foreach (var o in types)
                    if (o != t) Assert.IsFalse(o.IsAssignableFrom(t), t.Name + " is also a " + o.Name);
            }
        }
    }
}
