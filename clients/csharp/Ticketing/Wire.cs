// The Ticketing wire protocol, version 1 (docs/protocol.md): frames, their
// encoder and decoder. Both directions are implemented so that the tests'
// fake server uses the same codec and testdata/vectors.json checks all of it.
using System;
using System.IO;
using System.Text;

namespace Ticketing.Wire
{
    /// <summary>Frame type letters (docs/protocol.md, "Frames").</summary>
    internal static class FrameType
    {
        public const byte Hello = (byte)'H';
        public const byte Acquire = (byte)'A';
        public const byte Cancel = (byte)'C';
        public const byte Release = (byte)'L';
        public const byte ReleaseOwner = (byte)'U';
        public const byte Describe = (byte)'D';
        public const byte Admin = (byte)'J';
        public const byte Ready = (byte)'Y';
        public const byte Granted = (byte)'G';
        public const byte NotAcquired = (byte)'W';
        public const byte Queued = (byte)'Q';
        public const byte Cancelled = (byte)'X';
        public const byte Capacity = (byte)'B';
        public const byte Released = (byte)'R';
        public const byte NotHeld = (byte)'N';
        public const byte NotLeader = (byte)'M';
        public const byte Error = (byte)'E';
        public const byte Info = (byte)'I';
        public const byte AdminReply = (byte)'V';
        public const byte Ping = (byte)'P';
        public const byte Pong = (byte)'O';
        /// <summary>Forbidden: the principal may not make the request (final; the connection stays open).</summary>
        public const byte Forbidden = (byte)'F';
        /// <summary>Coord: a coordination request (docs/coordination.md).</summary>
        public const byte Coord = (byte)'K';
        /// <summary>CoordReply: a coordination answer or notification.</summary>
        public const byte CoordReply = (byte)'T';

        public static string Name(byte t)
        {
            return t >= 0x21 && t < 0x7f ? "'" + (char)t + "'" : "0x" + t.ToString("x2");
        }
    }

    /// <summary>One frame. Only the fields of its type's layout are meaningful.</summary>
    internal sealed class Frame
    {
        public byte Type;
        public uint Id;
        public byte[] Owner = new byte[16];
        public byte Wait;
        public byte Lease;
        public byte[] Key = new byte[0];
        public ulong Token;
        public ushort Version;
        public byte Flags;
        public byte[] Text = new byte[0];
        public uint IntervalMs;
        public uint Count;
        public uint LeaseMs;
        public uint QueuedMs;
        public byte Reason;
        public ushort Code;
        public uint RemainingMs;
        public ulong Nonce;
        /// <summary>Y with ReadyClusterId: the server's cluster ID (all zero: none yet).</summary>
        public byte[] ClusterId = new byte[Codec.ClusterIdLen];
        /// <summary>Y with ReadyIdlePings: the ping interval in ms while the connection is idle.</summary>
        public uint IdleIntervalMs;
        /// <summary>K and T: the coordination sub-op.</summary>
        public byte Op;
        /// <summary>K and T: the sub-op's body (CoordCodec encodes and decodes it); T's status is Code.</summary>
        public byte[] Body = new byte[0];

        public override string ToString()
        {
            return FrameType.Name(Type) + " frame (id " + Id + ")";
        }
    }

    /// <summary>
    /// A frame the decoder refuses, with the wire error code a receiver
    /// answers it with: 1 malformed, 2 too large, 3 unknown type.
    /// </summary>
    internal sealed class WireException : Exception
    {
        public readonly ushort Code;
        public WireException(ushort code, string message) : base(message) { Code = code; }
    }

    internal static class Codec
    {
        public const ushort Version = 1;
        public const int MaxFrame = 65536;
        public const int MaxToken = 1024;
        public const byte HelloAdmin = 1;
        /// <summary>Hello flag: the client reads the server's cluster ID in Y.</summary>
        public const byte HelloClusterId = 2;
        /// <summary>Hello flag: the client follows an idle ping interval (3 idle intervals of silence while idle).</summary>
        public const byte HelloIdlePings = 4;
        public const byte ReadyLeader = 1;
        /// <summary>Ready flag: Y ends with the server's cluster ID (all zero: none yet).</summary>
        public const byte ReadyClusterId = 4;
        /// <summary>Ready flag: Y ends with the idle ping interval (u32 ms).</summary>
        public const byte ReadyIdlePings = 8;
        /// <summary>The size of a cluster ID in Y.</summary>
        public const int ClusterIdLen = 16;
        /// <summary>Ready flag: the server carries many coordination sessions on one connection.</summary>
        public const byte ReadySessions = 2;
        /// <summary>
        /// The longest K or T frame (length prefix value) where coordination is
        /// served: 1 MiB of data and 8 KiB of the rest. The reader accepts a
        /// length over MaxFrame only for these two types.
        /// </summary>
        public const int MaxCoordFrame = (1 << 20) + (8 << 10);

        /// <summary>The length prefix of a frame with every variable field empty.</summary>
        public static int SmallestLength(byte type)
        {
            switch (type)
            {
                case FrameType.Hello: return 6;
                case FrameType.Acquire: return 25;
                case FrameType.Cancel: return 21;
                case FrameType.Release: return 15;
                case FrameType.ReleaseOwner: return 23;
                case FrameType.Describe: return 7;
                case FrameType.Admin: return 5;
                case FrameType.Ready: return 14;
                case FrameType.Granted: return 21;
                case FrameType.NotAcquired: return 9;
                case FrameType.Queued: return 9;
                case FrameType.Cancelled: return 5;
                case FrameType.Capacity: return 6;
                case FrameType.Forbidden: return 6;
                case FrameType.Released: return 5;
                case FrameType.NotHeld: return 5;
                case FrameType.NotLeader: return 3;
                case FrameType.Error: return 5;
                case FrameType.Info: return 42;
                case FrameType.AdminReply: return 7;
                case FrameType.Ping: return 9;
                case FrameType.Pong: return 9;
                case FrameType.Coord: return 6;
                case FrameType.CoordReply: return 8;
            }
            return -1;
        }

        // ---- encoding ----

        public static byte[] Encode(Frame f)
        {
            var w = new Writer();
            Append(w, f);
            return w.ToArray();
        }

        /// <summary>Appends f's bytes (length prefix included) to w.</summary>
        public static void Append(Writer w, Frame f)
        {
            int start = w.Length;
            w.U32(0); // patched below
            w.U8(f.Type);
            switch (f.Type)
            {
                case FrameType.Hello: w.U16(f.Version); w.U8(f.Flags); w.Str(f.Text); break;
                case FrameType.Acquire: w.U32(f.Id); w.Owner(f.Owner); w.U8(f.Wait); w.U8(f.Lease); w.Str(f.Key); break;
                case FrameType.Cancel: w.U32(f.Id); w.Owner(f.Owner); break;
                case FrameType.Release: w.U32(f.Id); w.U64(f.Token); w.Str(f.Key); break;
                case FrameType.ReleaseOwner: w.U32(f.Id); w.Owner(f.Owner); w.Str(f.Key); break;
                case FrameType.Describe: w.U32(f.Id); w.Str(f.Key); break;
                case FrameType.Admin: w.U32(f.Id); w.Bytes(f.Text); break;
                case FrameType.Ready:
                    w.U16(f.Version); w.U8(f.Flags); w.U32(f.IntervalMs); w.U32(f.Count); w.Str(f.Text);
                    if ((f.Flags & ReadyClusterId) != 0) w.Owner(f.ClusterId);
                    if ((f.Flags & ReadyIdlePings) != 0) w.U32(f.IdleIntervalMs);
                    break;
                case FrameType.Granted: w.U32(f.Id); w.U64(f.Token); w.U32(f.LeaseMs); w.U32(f.QueuedMs); break;
                case FrameType.NotAcquired: w.U32(f.Id); w.U32(f.QueuedMs); break;
                case FrameType.Queued: w.U32(f.Id); w.U32(f.Count); break;
                case FrameType.Cancelled:
                case FrameType.Released:
                case FrameType.NotHeld: w.U32(f.Id); break;
                case FrameType.Capacity:
                case FrameType.Forbidden: w.U32(f.Id); w.U8(f.Reason); break;
                case FrameType.NotLeader: w.Str(f.Text); break;
                case FrameType.Error: w.U16(f.Code); w.Str(f.Text); break;
                case FrameType.Info:
                    w.U32(f.Id); w.U8(f.Flags); w.U64(f.Token); w.Owner(f.Owner);
                    w.U32(f.RemainingMs); w.U32(f.LeaseMs); w.U32(f.Count); break;
                case FrameType.AdminReply: w.U32(f.Id); w.U16(f.Code); w.Bytes(f.Text); break;
                case FrameType.Ping:
                case FrameType.Pong: w.U64(f.Nonce); break;
                case FrameType.Coord: w.U32(f.Id); w.U8(f.Op); w.Bytes(f.Body); break;
                case FrameType.CoordReply: w.U32(f.Id); w.U8(f.Op); w.U16(f.Code); w.Bytes(f.Body); break;
                default:
                    throw new ArgumentException("cannot encode unknown frame type " + FrameType.Name(f.Type));
            }
            int len = w.Length - start - 4;
            int max = f.Type == FrameType.Coord || f.Type == FrameType.CoordReply ? MaxCoordFrame : MaxFrame;
            if (len > max)
                throw new ArgumentException("frame of " + len + " bytes is larger than " + max);
            w.PatchU32(start, (uint)len);
        }

        // ---- decoding ----

        /// <summary>
        /// Decodes one whole frame (length prefix included). Throws
        /// WireException with code 1, 2 or 3 for a frame a receiver must refuse.
        /// </summary>
        public static Frame Decode(byte[] buf)
        {
            if (buf.Length < 4) throw Malformed("fewer than 4 bytes: no length prefix");
            uint len = CheckLength(buf, 0);
            if (buf.Length - 4 != len)
                throw Malformed("the length prefix says " + len + " bytes but " + (buf.Length - 4) + " follow");
            return DecodeBody(buf, 4, (int)len);
        }

        /// <summary>Reads and checks a length prefix: 0 is malformed, above MaxFrame too large.</summary>
        public static uint CheckLength(byte[] b, int off)
        {
            uint len = (uint)(b[off] << 24 | b[off + 1] << 16 | b[off + 2] << 8 | b[off + 3]);
            if (len == 0) throw Malformed("length prefix 0 (a frame has at least its type byte)");
            if (len > MaxFrame) throw new WireException((ushort)ErrorCode.FrameTooLarge, "frame length " + len + " exceeds the maximum " + MaxFrame);
            return len;
        }

        /// <summary>Decodes the type byte and payload at buf[off..off+len).</summary>
        public static Frame DecodeBody(byte[] buf, int off, int len)
        {
            var f = new Frame();
            f.Type = buf[off];
            int min = SmallestLength(f.Type);
            if (min < 0) throw new WireException((ushort)ErrorCode.UnknownFrame, "unknown frame type " + FrameType.Name(f.Type));
            if (len < min) throw Malformed(FrameType.Name(f.Type) + " frame of " + len + " bytes, at least " + min + " expected");
            var r = new Reader(buf, off + 1, off + len, f.Type);
            switch (f.Type)
            {
                case FrameType.Hello: f.Version = r.U16(); f.Flags = r.U8(); f.Text = r.Str(); break;
                case FrameType.Acquire: f.Id = r.U32(); f.Owner = r.Owner(); f.Wait = r.U8(); f.Lease = r.U8(); f.Key = r.Str(); break;
                case FrameType.Cancel: f.Id = r.U32(); f.Owner = r.Owner(); break;
                case FrameType.Release: f.Id = r.U32(); f.Token = r.U64(); f.Key = r.Str(); break;
                case FrameType.ReleaseOwner: f.Id = r.U32(); f.Owner = r.Owner(); f.Key = r.Str(); break;
                case FrameType.Describe: f.Id = r.U32(); f.Key = r.Str(); break;
                case FrameType.Admin: f.Id = r.U32(); f.Text = r.Rest(); break;
                case FrameType.Ready:
                    f.Version = r.U16(); f.Flags = r.U8(); f.IntervalMs = r.U32(); f.Count = r.U32(); f.Text = r.Str();
                    if ((f.Flags & ReadyClusterId) != 0) f.ClusterId = r.Owner();
                    if ((f.Flags & ReadyIdlePings) != 0) f.IdleIntervalMs = r.U32();
                    break;
                case FrameType.Granted: f.Id = r.U32(); f.Token = r.U64(); f.LeaseMs = r.U32(); f.QueuedMs = r.U32(); break;
                case FrameType.NotAcquired: f.Id = r.U32(); f.QueuedMs = r.U32(); break;
                case FrameType.Queued: f.Id = r.U32(); f.Count = r.U32(); break;
                case FrameType.Cancelled:
                case FrameType.Released:
                case FrameType.NotHeld: f.Id = r.U32(); break;
                case FrameType.Capacity:
                case FrameType.Forbidden: f.Id = r.U32(); f.Reason = r.U8(); break;
                case FrameType.NotLeader: f.Text = r.Str(); break;
                case FrameType.Error: f.Code = r.U16(); f.Text = r.Str(); break;
                case FrameType.Info:
                    f.Id = r.U32(); f.Flags = r.U8(); f.Token = r.U64(); f.Owner = r.Owner();
                    f.RemainingMs = r.U32(); f.LeaseMs = r.U32(); f.Count = r.U32(); break;
                case FrameType.AdminReply: f.Id = r.U32(); f.Code = r.U16(); f.Text = r.Rest(); break;
                case FrameType.Ping:
                case FrameType.Pong: f.Nonce = r.U64(); break;
                case FrameType.Coord: f.Id = r.U32(); f.Op = r.U8(); f.Body = r.Rest(); break;
                case FrameType.CoordReply: f.Id = r.U32(); f.Op = r.U8(); f.Code = r.U16(); f.Body = r.Rest(); break;
            }
            r.End();
            return f;
        }

        /// <summary>
        /// The range checks a server applies to a decoded request (E 8):
        /// the lease within TicketBroker.MinLease..MaxLease, the key within
        /// 1..TicketBroker.MaxKeyBytes bytes, the hello token at most MaxToken bytes.
        /// Returns null when the frame is acceptable.
        /// </summary>
        public static string Validate(Frame f)
        {
            switch (f.Type)
            {
                case FrameType.Hello:
                    return f.Text.Length > MaxToken ? "hello token of " + f.Text.Length + " bytes is over " + MaxToken : null;
                case FrameType.Acquire:
                    int minLease = (int)TicketBroker.MinLease.TotalSeconds, maxLease = (int)TicketBroker.MaxLease.TotalSeconds;
                    if (f.Lease < minLease || f.Lease > maxLease) return "lease " + f.Lease + " s is outside " + minLease + ".." + maxLease + " s";
                    return CheckKey(f.Key);
                case FrameType.Release:
                case FrameType.ReleaseOwner:
                case FrameType.Describe:
                    return CheckKey(f.Key);
            }
            return null;
        }

        static string CheckKey(byte[] k)
        {
            return k.Length < 1 || k.Length > TicketBroker.MaxKeyBytes ? "key of " + k.Length + " bytes is outside 1.." + TicketBroker.MaxKeyBytes + " bytes" : null;
        }

        static WireException Malformed(string why) { return new WireException((ushort)ErrorCode.MalformedFrame, "malformed frame: " + why); }

        /// <summary>Reads exactly one frame from a stream; null at a clean end of stream before a frame.</summary>
        public static Frame ReadFrame(Stream s, byte[] head)
        {
            return ReadFrame(s, head, false);
        }

        /// <summary>
        /// ReadFrame that, with allowCoord, accepts a K or T frame longer than
        /// MaxFrame, up to MaxCoordFrame: its type byte is read before the rest,
        /// and any other type of that length is refused as too large.
        /// </summary>
        public static Frame ReadFrame(Stream s, byte[] head, bool allowCoord)
        {
            if (!ReadFull(s, head, 0, 4, true)) return null;
            uint len = (uint)(head[0] << 24 | head[1] << 16 | head[2] << 8 | head[3]);
            if (!allowCoord || len <= MaxFrame)
                len = CheckLength(head, 0); // too large: refused without reading the payload
            else if (len > MaxCoordFrame)
                throw new WireException((ushort)ErrorCode.FrameTooLarge, "frame length " + len + " exceeds the maximum " + MaxCoordFrame + " of a coordination frame");
            var body = new byte[len];
            ReadFull(s, body, 0, 1, false);
            if (len > MaxFrame && body[0] != FrameType.Coord && body[0] != FrameType.CoordReply)
                throw new WireException((ushort)ErrorCode.FrameTooLarge, FrameType.Name(body[0]) + " frame length " + len + " exceeds the maximum " + MaxFrame);
            ReadFull(s, body, 1, (int)len - 1, false);
            return DecodeBody(body, 0, (int)len);
        }

        static bool ReadFull(Stream s, byte[] b, int off, int n, bool eofOk)
        {
            int got = 0;
            while (got < n)
            {
                int k = s.Read(b, off + got, n - got);
                if (k <= 0)
                {
                    if (got == 0 && eofOk) return false;
                    throw new EndOfStreamException("the connection ended in the middle of a frame");
                }
                got += k;
            }
            return true;
        }

        sealed class Reader
        {
            readonly byte[] b; int p; readonly int end; readonly byte type;
            public Reader(byte[] b, int p, int end, byte type) { this.b = b; this.p = p; this.end = end; this.type = type; }
            void Need(int n)
            {
                if (end - p < n) throw Malformed(FrameType.Name(type) + " frame is too short");
            }
            public byte U8() { Need(1); return b[p++]; }
            public ushort U16() { Need(2); var v = (ushort)(b[p] << 8 | b[p + 1]); p += 2; return v; }
            public uint U32() { Need(4); var v = (uint)(b[p] << 24 | b[p + 1] << 16 | b[p + 2] << 8 | b[p + 3]); p += 4; return v; }
            public ulong U64() { ulong hi = U32(); ulong lo = U32(); return hi << 32 | lo; }
            public byte[] Owner() { Need(16); var o = new byte[16]; Buffer.BlockCopy(b, p, o, 0, 16); p += 16; return o; }
            public byte[] Str()
            {
                int n = U16();
                if (end - p < n) throw Malformed(FrameType.Name(type) + " frame: string length " + n + " runs past the end of the frame");
                var s = new byte[n]; Buffer.BlockCopy(b, p, s, 0, n); p += n; return s;
            }
            public byte[] Rest() { var s = new byte[end - p]; Buffer.BlockCopy(b, p, s, 0, s.Length); p = end; return s; }
            public void End()
            {
                if (p != end) throw Malformed(FrameType.Name(type) + " frame has " + (end - p) + " trailing bytes");
            }
        }
    }

    /// <summary>A growable big-endian byte buffer.</summary>
    internal sealed class Writer
    {
        byte[] b = new byte[64];
        int n;
        public int Length { get { return n; } }
        void Grow(int k)
        {
            if (n + k <= b.Length) return;
            var nb = new byte[Math.Max(b.Length * 2, n + k)];
            Buffer.BlockCopy(b, 0, nb, 0, n);
            b = nb;
        }
        public void U8(byte v) { Grow(1); b[n++] = v; }
        public void U16(ushort v) { Grow(2); b[n++] = (byte)(v >> 8); b[n++] = (byte)v; }
        public void U32(uint v) { Grow(4); b[n++] = (byte)(v >> 24); b[n++] = (byte)(v >> 16); b[n++] = (byte)(v >> 8); b[n++] = (byte)v; }
        public void U64(ulong v) { U32((uint)(v >> 32)); U32((uint)v); }
        public void Owner(byte[] o)
        {
            if (o == null || o.Length != 16) throw new ArgumentException("owner must be 16 bytes");
            Bytes(o);
        }
        public void Bytes(byte[] s) { Grow(s.Length); Buffer.BlockCopy(s, 0, b, n, s.Length); n += s.Length; }
        public void Str(byte[] s)
        {
            if (s.Length > 0xffff) throw new ArgumentException("string of " + s.Length + " bytes does not fit a u16 length");
            U16((ushort)s.Length); Bytes(s);
        }
        public void PatchU32(int at, uint v) { b[at] = (byte)(v >> 24); b[at + 1] = (byte)(v >> 16); b[at + 2] = (byte)(v >> 8); b[at + 3] = (byte)v; }
        public byte[] ToArray() { var r = new byte[n]; Buffer.BlockCopy(b, 0, r, 0, n); return r; }
        public void Reset() { n = 0; }
        public byte[] Raw { get { return b; } }
    }
}
