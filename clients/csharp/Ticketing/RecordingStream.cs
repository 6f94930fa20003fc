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
    /// <summary>Remembers the first bytes read, to explain a failed handshake.</summary>
    internal sealed class RecordingStream : Stream
    {
        readonly Stream inner;
        readonly byte[] first = new byte[16];
        int n;
        internal long Total;
        internal RecordingStream(Stream inner) { this.inner = inner; }
        internal byte[] First() { var r = new byte[n]; Buffer.BlockCopy(first, 0, r, 0, n); return r; }
        public override int Read(byte[] buffer, int offset, int count)
        {
            int k = inner.Read(buffer, offset, count);
            if (k > 0)
            {
                int c = Math.Min(k, first.Length - n);
                if (c > 0) { Buffer.BlockCopy(buffer, offset, first, n, c); n += c; }
                Total += k;
            }
            return k;
        }
        public override void Write(byte[] buffer, int offset, int count) { inner.Write(buffer, offset, count); }
        public override void Flush() { inner.Flush(); }
        public override bool CanRead { get { return true; } }
        public override bool CanWrite { get { return true; } }
        public override bool CanSeek { get { return false; } }
        public override long Length { get { throw new NotSupportedException(); } }
        public override long Position { get { throw new NotSupportedException(); } set { throw new NotSupportedException(); } }
        public override long Seek(long offset, SeekOrigin origin) { throw new NotSupportedException(); }
        public override void SetLength(long value) { throw new NotSupportedException(); }
        protected override void Dispose(bool disposing) { if (disposing) inner.Dispose(); base.Dispose(disposing); }
    }
}
