using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Net.Security;
using System.Net.Sockets;
using System.Security.Authentication;
using System.Security.Cryptography.X509Certificates;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Ticketing.Wire;

namespace Ticketing
{
    // Dialing: TCP, TLS and the hello, and starting the reader, the writer and the watchdog.
    internal sealed partial class Connection
    {
        internal static void SplitAddr(string addr, out string host, out int port)
        {
            int i = addr.LastIndexOf(':');
            host = i > 0 ? addr.Substring(0, i) : "";
            if (host.StartsWith("[") && host.EndsWith("]")) host = host.Substring(1, host.Length - 2);
            if (i <= 0 || host.Length == 0 || !int.TryParse(addr.Substring(i + 1), out port) || port < 1 || port > 65535)
                throw new ArgumentException("ticketing: address \"" + addr + "\" is not host:port", "addresses");
        }

        /// <summary>Connects to addr, runs TLS and the hello, and starts the connection's threads.</summary>
        internal static async Task<Connection> DialAsync(string addr, Config cfg, byte flags, IConnHooks hooks, CancellationToken ct)
        {
            string host; int port;
            SplitAddr(addr, out host, out port);
            var tcp = new TcpClient();
            tcp.NoDelay = true;
            try
            {
                using (var tcs = CancellationTokenSource.CreateLinkedTokenSource(ct))
                {
                    var connect = tcp.ConnectAsync(host, port);
                    var done = await Task.WhenAny(connect, Task.Delay(cfg.DialTimeout, tcs.Token)).ConfigureAwait(false);
                    tcs.Cancel();
                    if (done != connect)
                    {
                        tcp.Close();
                        Observe(connect);
                        ct.ThrowIfCancellationRequested();
                        throw new HelloException(new TicketingException("cannot connect to " + addr + ": no answer within " + cfg.DialTimeout.TotalMilliseconds + " ms"), null, false);
                    }
                    await connect.ConfigureAwait(false);
                }
            }
            catch (OperationCanceledException) { tcp.Close(); throw; }
            catch (HelloException) { throw; }
            catch (Exception e)
            {
                tcp.Close();
                throw new HelloException(new TicketingException("cannot connect to " + addr + ": " + e.Message, e), null, false);
            }
            // The rest is blocking I/O bounded by socket timeouts and by
            // shutting the socket down when ct ends: a bare Close does not wake
            // a read blocked in the TLS handshake or the hello on every runtime
            // (Mono's), Shutdown does.
            using (ct.Register(() => Abort(tcp)))
            {
                try
                {
                    return await Task.Run(() => Handshake(addr, host, port, tcp, cfg, flags, hooks, ct)).ConfigureAwait(false);
                }
                catch (Exception)
                {
                    tcp.Close();
                    ct.ThrowIfCancellationRequested();
                    throw;
                }
            }
        }

        /// <summary>Ends a socket so that a read or write blocked on it returns at once.</summary>
        static void Abort(TcpClient tcp)
        {
            try { tcp.Client.Shutdown(SocketShutdown.Both); } catch (Exception) { }
            try { tcp.Close(); } catch (Exception) { }
        }

        static void Observe(Task t) { t.ContinueWith(x => { var _ = x.Exception; }, TaskContinuationOptions.OnlyOnFaulted); }

        static Connection Handshake(string addr, string host, int port, TcpClient tcp, Config cfg, byte flags, IConnHooks hooks, CancellationToken ct)
        {
            int ms = (int)Math.Max(1, cfg.DialTimeout.TotalMilliseconds);
            tcp.ReceiveTimeout = ms;
            tcp.SendTimeout = ms;
            var rec = new RecordingStream(tcp.GetStream());
            Stream s = rec;
            bool certRequested = false;
            if (cfg.Tls != null)
            {
                string why = null;
                var tls = cfg.Tls;
                var ssl = new SslStream(rec, false,
                    (sender, cert, chain, errors) => tls.Validate(host, cert, chain, errors, out why),
                    (sender, target, local, remote, issuers) =>
                    {
                        certRequested = true;
                        return tls.Client;
                    });
                var certs = new X509CertificateCollection();
                if (tls.Client != null) certs.Add(tls.Client);
                try
                {
                    // None: the operating system picks the version (TLS 1.3 where it has it).
                    ssl.AuthenticateAsClient(host, certs, SslProtocols.None, false);
                }
                catch (Exception e)
                {
                    ssl.Dispose();
                    throw TlsFailure(addr, e, why, certRequested, tls, rec);
                }
                s = ssl;
            }
            var hello = new Frame { Type = FrameType.Hello, Version = Codec.Version, Flags = (byte)(flags | Codec.HelloClusterId | Codec.HelloIdlePings), Text = cfg.Token };
            Frame first;
            try
            {
                var hb = Codec.Encode(hello);
                s.Write(hb, 0, hb.Length);
                s.Flush();
                first = Codec.ReadFrame(s, new byte[4]);
                if (first == null) throw new EndOfStreamException("closed by the server");
            }
            catch (WireException e)
            {
                s.Dispose();
                byte[] head = rec.First();
                if (cfg.Tls == null && head.Length > 0 && (head[0] == 0x15 || head[0] == 0x16))
                    throw new HelloException(new TicketingException("the server " + addr + " answered with TLS: it requires TLS, and this broker is configured without it (TlsMode.Off)"), null, true);
                throw new HelloException(new TicketingException("the server " + addr + " answered the hello with an invalid frame (" + e.Message + "); is it a Ticketing server?", e), null, true);
            }
            catch (Exception e)
            {
                s.Dispose();
                if (cfg.Tls != null && certRequested)
                    throw new HelloException(new UnauthenticatedException("the server " + addr + " closed the TLS session after asking for a client certificate: it refused " +
                        (cfg.Tls.Client != null ? "the client certificate" : "the connection without one (configure TlsMode.WithClientCert)"), e), null, true);
                if (cfg.Tls == null && rec.Total == 0)
                {
                    // A TLS server closes a plain connection without a word:
                    // check with a TLS handshake on a second connection.
                    ct.ThrowIfCancellationRequested(); // the broker is closing: no probe
                    if (AnswersTls(host, port, cfg.DialTimeout, ct))
                        throw new HelloException(new TicketingException("the server " + addr + " requires TLS (it closed the plain connection and answers a TLS handshake); this broker is configured without TLS (TlsMode.Off)", e), null, true);
                    throw new HelloException(new TicketingException("the server " + addr + " closed the connection without answering the hello (" + e.Message + ")", e), null, false);
                }
                throw new HelloException(new TicketingException("no answer to the hello from " + addr + ": " + e.Message, e), null, false);
            }
            switch (first.Type)
            {
                case FrameType.Ready:
                    {
                        var wrong = cfg.Pin.Check(addr, first);
                        if (wrong != null)
                        {
                            s.Dispose();
                            throw new HelloException(wrong, null, true);
                        }
                        break;
                    }
                case FrameType.NotLeader:
                    {
                        s.Dispose();
                        var hint = Encoding.UTF8.GetString(first.Text);
                        throw new HelloException(new NotLeaderException(addr, hint), hint, false);
                    }
                case FrameType.Error:
                    {
                        s.Dispose();
                        var se = new ServerErrorException(addr, (ErrorCode)first.Code, Encoding.UTF8.GetString(first.Text));
                        if (se.Code == ErrorCode.Unauthenticated)
                            throw new HelloException(new UnauthenticatedException("the server " + addr + " refused the client token (E code 5: " + se.ServerMessage + "); fix the configured token", se) { Address = addr, ServerCode = se.Code }, null, true);
                        bool rej = se.Code == ErrorCode.UnsupportedVersion || se.Code == ErrorCode.InvalidArgument;
                        throw new HelloException(se, null, rej);
                    }
                case FrameType.Capacity:
                    s.Dispose();
                    throw new HelloException(new CapacityException("the server " + addr + " refused the connection: it is at its connection limit (" + (CapacityReason)first.Reason + "); retry later", (CapacityReason)first.Reason) { Address = addr }, null, true);
                default:
                    s.Dispose();
                    throw new HelloException(new TicketingException("the server " + addr + " answered the hello with an unexpected " + FrameType.Name(first.Type) + " frame"), null, true);
            }
            var c = new Connection(addr, tcp, s, hooks, first.Count);
            c.NodeId = Encoding.UTF8.GetString(first.Text);
            c.Leader = (first.Flags & Codec.ReadyLeader) != 0;
            c.Sessions = (first.Flags & Codec.ReadySessions) != 0;
            c.Interval = TimeSpan.FromMilliseconds(first.IntervalMs);
            if (first.IntervalMs == 0)
            {
                // The server sends no pings: the client pings to notice a silent server.
                c.ownPing = cfg.OwnPingInterval;
                c.Silence = TimeSpan.FromTicks(cfg.OwnPingInterval.Ticks * 3);
            }
            else
            {
                c.Silence = TimeSpan.FromTicks(c.Interval.Ticks * 3);
                if ((first.Flags & Codec.ReadyIdlePings) != 0 && first.IdleIntervalMs > first.IntervalMs)
                    c.IdleSilence = TimeSpan.FromTicks(TimeSpan.FromMilliseconds(first.IdleIntervalMs).Ticks * 3);
            }
            tcp.ReceiveTimeout = 0; // the watchdog detects silence
            tcp.SendTimeout = (int)Math.Min(int.MaxValue, Math.Max(c.Silence.TotalMilliseconds, 10000));
            c.StartThreads();
            return c;
        }

        /// <summary>Whether host:port completes a TLS handshake (any certificate accepted: this only tells TLS from plain).</summary>
        static bool AnswersTls(string host, int port, TimeSpan timeout, CancellationToken ct)
        {
            try
            {
                using (var t = new TcpClient())
                using (ct.Register(() => Abort(t)))
                {
                    var connect = t.ConnectAsync(host, port);
                    if (!connect.Wait(timeout)) return false;
                    t.ReceiveTimeout = (int)timeout.TotalMilliseconds;
                    t.SendTimeout = (int)timeout.TotalMilliseconds;
                    using (var ssl = new SslStream(t.GetStream(), false, (a, b, c, d) => true))
                    {
                        ssl.AuthenticateAsClient(host, null, SslProtocols.None, false);
                        return true;
                    }
                }
            }
            catch (Exception)
            {
                return false;
            }
        }

        static HelloException TlsFailure(string addr, Exception e, string why, bool certRequested, TlsSettings tls, RecordingStream rec)
        {
            if (why != null)
                return new HelloException(new TicketingException("the TLS certificate of " + addr + " was refused: " + why, e), null, true);
            byte[] head = rec.First();
            if (head.Length >= 5 && head[0] == 0 && head[4] == FrameType.Error)
                return new HelloException(new TicketingException("the server " + addr + " answered the TLS handshake with a Ticketing frame: it does not use TLS (configure TlsMode.Off, or enable TLS on the server)", e), null, true);
            if (certRequested)
                return new HelloException(new UnauthenticatedException("the server " + addr + " refused the TLS handshake after asking for a client certificate: it refused " +
                    (tls.Client != null ? "the client certificate" : "the connection without one (configure TlsMode.WithClientCert)"), e), null, true);
            return new HelloException(new TicketingException("the TLS handshake with " + addr + " failed: " + e.Message, e), null, false);
        }

        void StartThreads()
        {
            var r = new Thread(ReadLoop) { IsBackground = true, Name = "ticketing reader " + Addr };
            var w = new Thread(WriteLoop) { IsBackground = true, Name = "ticketing writer " + Addr };
            r.Start();
            w.Start();
            var period = ownPing > TimeSpan.Zero ? ownPing : TimeSpan.FromTicks(Math.Max(Silence.Ticks / 6, TimeSpan.FromMilliseconds(5).Ticks));
            watchdog = new Timer(_ => Tick(), null, period, period);
        }
    }
}
