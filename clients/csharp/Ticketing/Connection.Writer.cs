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
    // The writer thread: every queued frame coalesced into one write.
    internal sealed partial class Connection
    {
        void WriteLoop()
        {
            for (;;)
            {
                Writer buf;
                lock (mu)
                {
                    while (wbuf.Length == 0 && failure == null) Monitor.Wait(mu);
                    if (failure != null) return;
                    buf = wbuf;
                    wbuf = spare;
                    wbuf.Reset();
                }
                try
                {
                    stream.Write(buf.Raw, 0, buf.Length);
                    stream.Flush();
                }
                catch (Exception e)
                {
                    Fail(new ConnFailure { Kind = FailKind.Drop, Addr = Addr, Cause = e });
                    return;
                }
                lock (mu)
                {
                    buf.Reset();
                    spare = buf;
                }
            }
        }
    }
}
