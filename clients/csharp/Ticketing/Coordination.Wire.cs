// The bodies of the coordination frames K and T (docs/protocol.md,
// "Coordination frames"): one definition of each sub-op, status and flag.
using System;
using System.Collections.Generic;

namespace Ticketing.Wire
{
    /// <summary>Coordination sub-ops (the op byte of K and T).</summary>
    internal static class CoordOp
    {
        public const byte CreateNode = 1;
        public const byte AlterNode = 2;
        public const byte DropNode = 3;
        public const byte DescribeNode = 4;
        public const byte Attach = 5;
        public const byte Stop = 6;
        public const byte CreateSemaphore = 7;
        public const byte UpdateSemaphore = 8;
        public const byte DeleteSemaphore = 9;
        public const byte Acquire = 10;
        public const byte Release = 11;
        public const byte DescribeSemaphore = 12;
        public const byte ListSessions = 13;
        public const byte Queued = 64;
        public const byte Changed = 65;
        public const byte Lost = 66;
        public const byte SessionEnded = 67;
        /// <summary>Set in a session request's op on a connection with ReadySessions: the body starts with the session.</summary>
        public const byte ForSession = 0x80;

        /// <summary>Whether op acts for a session (it names its session on a shared connection).</summary>
        public static bool IsSessionOp(byte op)
        {
            switch (op)
            {
                case Attach: case Stop: case CreateSemaphore: case UpdateSemaphore: case DeleteSemaphore:
                case Acquire: case Release: case DescribeSemaphore:
                    return true;
            }
            return false;
        }
    }

    /// <summary>Flag bits and special values of the coordination bodies.</summary>
    internal static class CoordFlag
    {
        public const byte Ephemeral = 1;      // acquire; describe answer
        public const byte Force = 1;          // delete semaphore
        public const byte Acquired = 1;       // acquire answer
        public const byte Released = 1;       // release answer
        public const byte Owners = 1;         // describe
        public const byte Waiters = 2;
        public const byte WatchData = 4;
        public const byte WatchOwners = 8;
        public const byte NoData = 16;
        public const byte MoreHolders = 2;    // describe answer
        public const byte ChangedData = 1;    // Changed
        public const byte ChangedOwners = 2;
        public const ulong Exclusive = ulong.MaxValue;
        public const ulong WaitForever = ulong.MaxValue;
        public const byte EndExpired = 1, EndStopped = 2, EndNodeDropped = 3;
    }

    /// <summary>One owner or waiter in a describe answer.</summary>
    internal sealed class CoordHolder
    {
        public ulong OrderId, Session, Count, TimeoutMs;
        public byte[] Data = new byte[0];
    }

    /// <summary>One session in a ListSessions answer.</summary>
    internal sealed class CoordSessionInfo
    {
        public ulong Session, SeqNo, TimeoutMs;
        public byte Flags; // bit 0: attached now
        public byte[] Desc = new byte[0];
    }

    /// <summary>Every field of every coordination body; a sub-op uses its own.</summary>
    internal sealed class CoordBody
    {
        public byte[] Path = new byte[0];
        public uint SelfCheckMs, GraceMs, MaxSessions, MaxSemaphores, MaxWaiters;
        public byte ReadMode, AttachMode;
        public uint SessionCount, SemaphoreCount, WaiterCount;
        public ulong Session, SeqNo, TimeoutMs;
        public byte[] Key = new byte[0];
        public byte[] Desc = new byte[0];
        public byte[] Name = new byte[0];
        public ulong Limit, Count, After, OrderId, Version;
        public byte Flags, Reason;
        public byte[] Data = new byte[0];
        public List<CoordHolder> Owners = new List<CoordHolder>();
        public List<CoordHolder> Queue = new List<CoordHolder>();
        public List<CoordSessionInfo> Sessions = new List<CoordSessionInfo>();
        public string Message = "";
    }

    internal static class CoordCodec
    {
        /// <summary>The largest data of a semaphore or a hold.</summary>
        public const int MaxData = 1 << 20;
        public const int MaxPath = 1024, MaxName = 1024, MaxKey = 16, MaxDesc = 1024;

        /// <summary>Encodes a request body; session (for a session op on a shared connection, not Attach) is prepended when forSession.</summary>
        public static byte[] Request(byte op, CoordBody b, bool forSession)
        {
            var w = new Writer();
            if (forSession && op != CoordOp.Attach) w.U64(b.Session);
            switch (op)
            {
                case CoordOp.CreateNode:
                case CoordOp.AlterNode:
                    w.Str(b.Path); w.U32(b.SelfCheckMs); w.U32(b.GraceMs); w.U8(b.ReadMode); w.U8(b.AttachMode);
                    w.U32(b.MaxSessions); w.U32(b.MaxSemaphores); w.U32(b.MaxWaiters); break;
                case CoordOp.DropNode:
                case CoordOp.DescribeNode: w.Str(b.Path); break;
                case CoordOp.Attach:
                    w.Str(b.Path); w.U64(b.Session); w.U64(b.SeqNo); w.U64(b.TimeoutMs); w.Str(b.Key); w.Str(b.Desc); break;
                case CoordOp.Stop: break;
                case CoordOp.CreateSemaphore: w.Str(b.Name); w.U64(b.Limit); Data(w, b.Data); break;
                case CoordOp.UpdateSemaphore: w.Str(b.Name); Data(w, b.Data); break;
                case CoordOp.DeleteSemaphore: w.Str(b.Name); w.U8(b.Flags); break;
                case CoordOp.Acquire: w.Str(b.Name); w.U64(b.Count); w.U64(b.TimeoutMs); w.U8(b.Flags); Data(w, b.Data); break;
                case CoordOp.Release: w.Str(b.Name); break;
                case CoordOp.DescribeSemaphore: w.Str(b.Name); w.U8(b.Flags); w.U64(b.After); break;
                case CoordOp.ListSessions: w.Str(b.Path); w.U64(b.After); break;
                default: throw new ArgumentException("coordination request sub-op " + op + " is unknown");
            }
            return w.ToArray();
        }

        static void Data(Writer w, byte[] d) { w.U32((uint)d.Length); w.Bytes(d); }

        /// <summary>Decodes the body of a T frame (op without ForSession); throws WireException (code 1) for a malformed one.</summary>
        public static CoordBody Reply(byte op, ushort status, byte[] body)
        {
            var r = new BodyReader(body);
            var b = new CoordBody();
            if (status != 0 && op < CoordOp.Queued)
            {
                b.Message = new System.Text.UTF8Encoding(false, false).GetString(r.Str());
                r.End();
                return b;
            }
            switch (op)
            {
                case CoordOp.CreateNode: case CoordOp.AlterNode: case CoordOp.DropNode: case CoordOp.Stop:
                case CoordOp.CreateSemaphore: case CoordOp.UpdateSemaphore: case CoordOp.DeleteSemaphore:
                    break;
                case CoordOp.DescribeNode:
                    b.SelfCheckMs = r.U32(); b.GraceMs = r.U32(); b.ReadMode = r.U8(); b.AttachMode = r.U8();
                    b.MaxSessions = r.U32(); b.MaxSemaphores = r.U32(); b.MaxWaiters = r.U32();
                    b.SessionCount = r.U32(); b.SemaphoreCount = r.U32(); b.WaiterCount = r.U32(); break;
                case CoordOp.Attach: b.Session = r.U64(); b.SeqNo = r.U64(); break;
                case CoordOp.Acquire: b.Flags = r.U8(); b.OrderId = r.U64(); b.Count = r.U64(); break;
                case CoordOp.Release: b.Flags = r.U8(); break;
                case CoordOp.DescribeSemaphore:
                    b.Limit = r.U64(); b.Count = r.U64(); b.Flags = r.U8(); b.Data = r.Data();
                    b.Owners = r.Holders(); b.Queue = r.Holders(); b.Version = r.U64(); break;
                case CoordOp.ListSessions: b.Flags = r.U8(); b.Sessions = r.SessionList(); break;
                case CoordOp.Queued: b.OrderId = r.U64(); break;
                case CoordOp.Changed: b.Flags = r.U8(); break;
                case CoordOp.Lost: b.Name = r.Str(); b.OrderId = r.U64(); break;
                case CoordOp.SessionEnded: b.Session = r.U64(); b.Reason = r.U8(); break;
                default: throw Malformed("T frame of unknown sub-op " + op);
            }
            r.End();
            return b;
        }

        static WireException Malformed(string why) { return new WireException((ushort)ErrorCode.MalformedFrame, "malformed coordination answer: " + why); }

        sealed class BodyReader
        {
            readonly byte[] b; int p;
            public BodyReader(byte[] b) { this.b = b; }
            void Need(long n) { if (b.Length - p < n) throw Malformed("body too short"); }
            public byte U8() { Need(1); return b[p++]; }
            public ushort U16() { Need(2); var v = (ushort)(b[p] << 8 | b[p + 1]); p += 2; return v; }
            public uint U32() { Need(4); var v = (uint)(b[p] << 24 | b[p + 1] << 16 | b[p + 2] << 8 | b[p + 3]); p += 4; return v; }
            public ulong U64() { ulong hi = U32(); ulong lo = U32(); return hi << 32 | lo; }
            byte[] Take(long n) { Need(n); var s = new byte[n]; Buffer.BlockCopy(b, p, s, 0, (int)n); p += (int)n; return s; }
            public byte[] Str() { return Take(U16()); }
            public byte[] Data() { return Take(U32()); }
            public List<CoordHolder> Holders()
            {
                uint n = U32();
                // Each holder is at least 36 bytes: a count past the body is malformed, not a huge allocation.
                Need((long)n * 36);
                var list = new List<CoordHolder>((int)n);
                for (uint i = 0; i < n; i++)
                    list.Add(new CoordHolder { OrderId = U64(), Session = U64(), Count = U64(), TimeoutMs = U64(), Data = Data() });
                return list;
            }
            public List<CoordSessionInfo> SessionList()
            {
                uint n = U32();
                Need((long)n * 27); // each at least 27 bytes
                var list = new List<CoordSessionInfo>((int)n);
                for (uint i = 0; i < n; i++)
                    list.Add(new CoordSessionInfo { Session = U64(), SeqNo = U64(), TimeoutMs = U64(), Flags = U8(), Desc = Str() });
                return list;
            }
            public void End() { if (p != b.Length) throw Malformed((b.Length - p) + " trailing bytes"); }
        }
    }
}
