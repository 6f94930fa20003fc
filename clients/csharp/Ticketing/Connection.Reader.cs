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
    // The reader thread: frames from the server, matched to the pending requests.
    internal sealed partial class Connection
    {
        void ReadLoop()
        {
            var head = new byte[4];
            var live = new LivenessStream(stream, this);
            for (;;)
            {
                Frame f;
                try
                {
                    f = Codec.ReadFrame(live, head, coordReplies);
                }
                catch (WireException e)
                {
                    Fail(new ConnFailure { Kind = FailKind.Protocol, Addr = Addr, Cause = e });
                    return;
                }
                catch (Exception e)
                {
                    Fail(new ConnFailure { Kind = FailKind.Drop, Addr = Addr, Cause = e });
                    return;
                }
                if (f == null)
                {
                    Fail(new ConnFailure { Kind = FailKind.Drop, Addr = Addr, Cause = new EndOfStreamException("closed by the server") });
                    return;
                }
                var fl = Dispatch(f);
                if (fl != null)
                {
                    Fail(fl);
                    return;
                }
            }
        }

        void Tick()
        {
            // Idle (nothing pending, never a coordination request, the server
            // pinging at its idle interval): 3 idle intervals since the last
            // byte; busy: 3 ping intervals since the later of the last byte
            // and the moment it became busy.
            long from = Interlocked.Read(ref lastRecv);
            TimeSpan bound = Silence;
            lock (mu)
            {
                if (IdleSilence > TimeSpan.Zero && pending.Count == 0 && !coordSent) bound = IdleSilence;
                else from = Math.Max(from, busySince);
            }
            var q = TimeSpan.FromSeconds((double)(Stopwatch.GetTimestamp() - from) / Stopwatch.Frequency);
            if (q > bound)
            {
                Fail(new ConnFailure { Kind = FailKind.Silent, Addr = Addr, Quiet = bound });
                return;
            }
            if (ownPing > TimeSpan.Zero)
            {
                lock (mu)
                {
                    if (failure != null) return;
                    Codec.Append(wbuf, new Frame { Type = FrameType.Ping, Nonce = (ulong)Interlocked.Increment(ref pingNonce) });
                    Monitor.PulseAll(mu);
                }
            }
        }

        /// <summary>
        /// The reader's view of the connection's stream: every read that
        /// returns bytes is a sign of life (Tick's silence bound), not only a
        /// whole frame, so that a large answer on a slow link, with the
        /// server's pings behind it, does not end the connection.
        /// </summary>
        sealed class LivenessStream : Stream
        {
            readonly Stream inner;
            readonly Connection conn;
            internal LivenessStream(Stream inner, Connection conn) { this.inner = inner; this.conn = conn; }
            public override int Read(byte[] buffer, int offset, int count)
            {
                int k = inner.Read(buffer, offset, count);
                if (k > 0) Interlocked.Exchange(ref conn.lastRecv, Stopwatch.GetTimestamp());
                return k;
            }
            public override bool CanRead { get { return true; } }
            public override bool CanSeek { get { return false; } }
            public override bool CanWrite { get { return false; } }
            public override long Length { get { throw new NotSupportedException(); } }
            public override long Position { get { throw new NotSupportedException(); } set { throw new NotSupportedException(); } }
            public override void Flush() { }
            public override long Seek(long offset, SeekOrigin origin) { throw new NotSupportedException(); }
            public override void SetLength(long value) { throw new NotSupportedException(); }
            public override void Write(byte[] buffer, int offset, int count) { throw new NotSupportedException(); }
        }

        static bool Answers(byte req, byte ans)
        {
            if (ans == FrameType.Forbidden) // a refusal is the final answer of any request but C
                return req == FrameType.Acquire || req == FrameType.Release || req == FrameType.ReleaseOwner || req == FrameType.Describe;
            switch (req)
            {
                case FrameType.Coord:
                    return ans == FrameType.CoordReply || ans == FrameType.Capacity;
                case FrameType.Acquire:
                    return ans == FrameType.Granted || ans == FrameType.NotAcquired || ans == FrameType.Queued ||
                        ans == FrameType.Cancelled || ans == FrameType.Capacity;
                case FrameType.Release:
                case FrameType.ReleaseOwner:
                    return ans == FrameType.Released || ans == FrameType.NotHeld || ans == FrameType.Capacity;
                case FrameType.Describe:
                    return ans == FrameType.Info || ans == FrameType.Capacity;
            }
            return false;
        }

        /// <summary>Handles one received frame; a non-null result ends the connection.</summary>
        ConnFailure Dispatch(Frame f)
        {
            switch (f.Type)
            {
                case FrameType.Ping:
                    lock (mu)
                    {
                        if (failure == null)
                        {
                            Codec.Append(wbuf, new Frame { Type = FrameType.Pong, Nonce = f.Nonce });
                            Monitor.PulseAll(mu);
                        }
                    }
                    return null;
                case FrameType.Pong:
                    return null;
                case FrameType.NotLeader:
                    {
                        var hint = Encoding.UTF8.GetString(f.Text);
                        return new ConnFailure { Kind = FailKind.NotLeader, Addr = Addr, Hint = hint, Cause = new NotLeaderException(Addr, hint) };
                    }
                case FrameType.Error:
                    return new ConnFailure { Kind = FailKind.ServerError, Addr = Addr, Cause = new ServerErrorException(Addr, (ErrorCode)f.Code, Encoding.UTF8.GetString(f.Text)) };
                case FrameType.Granted:
                case FrameType.NotAcquired:
                case FrameType.Queued:
                case FrameType.Cancelled:
                case FrameType.Capacity:
                case FrameType.Released:
                case FrameType.NotHeld:
                case FrameType.Info:
                case FrameType.Forbidden:
                    break;
                case FrameType.CoordReply:
                    {
                        ConnFailure fl;
                        if (CoordNotice(f, out fl)) return fl;
                    }
                    break;
                default:
                    return Protocol("unexpected " + FrameType.Name(f.Type) + " frame from the server");
            }
            Call cl;
            TaskCompletionSource<bool> settled = null;
            bool late;
            lock (mu)
            {
                if (failure != null) return null;
                if (!pending.TryGetValue(f.Id, out cl))
                    return Protocol(FrameType.Name(f.Type) + " frame for request id " + f.Id + ", which is not in flight");
                if (!Answers(cl.Type, f.Type))
                    return Protocol(FrameType.Name(f.Type) + " frame answers request id " + f.Id + ", which is a " + FrameType.Name(cl.Type));
                if (f.Type == FrameType.Queued)
                {
                    if (cl.Queued) return Protocol("second Q frame for request id " + f.Id);
                    cl.Queued = true;
                    return null;
                }
                pending.Remove(f.Id);
                FreeLargeLocked(cl);
                if (cl.Watch != null && f.Type == FrameType.CoordReply && f.Code == 0) watches[f.Id] = cl.Watch;
                // Close waits for this (CancelAcquiresForClose); it is told
                // only after a late grant's release was queued below, or Close
                // could stop the releaser first.
                if (acquiresSettled != null && cl.Type == FrameType.Acquire && !AnyAcquirePendingLocked())
                    settled = acquiresSettled;
                var sem = Slots(cl);
                if (sem != null) sem.Release();
                if (!cl.Abandoned)
                {
                    cl.Res.TrySetResult(new Answer { F = f });
                    if (settled != null) settled.TrySetResult(true);
                    return null;
                }
                late = f.Type == FrameType.Granted && cl.Type == FrameType.Acquire && hooks != null;
            }
            // A grant for a caller that left: released outside the lock (the
            // hook may report to the user's observer).
            if (late) hooks.LateGrant(cl.Key, f.Token);
            if (settled != null) settled.TrySetResult(true);
            return null;
        }

        ConnFailure Protocol(string why)
        {
            return new ConnFailure { Kind = FailKind.Protocol, Addr = Addr, Cause = new TicketingException(why) };
        }
    }
}
