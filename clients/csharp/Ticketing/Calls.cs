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
    /// <summary>Why a connection ended.</summary>
    internal enum FailKind { Drop, Silent, NotLeader, ServerError, Protocol, Closed }

    /// <summary>Why a connection ended; every request pending on it gets it.</summary>
    internal sealed class ConnFailure
    {
        internal FailKind Kind;
        internal string Addr;
        internal string Hint = ""; // M: the leader's address, if the server knew it
        internal Exception Cause;
        internal TimeSpan Quiet;

        internal bool Closed { get { return Kind == FailKind.Closed; } }

        /// <summary>
        /// The server ended the session because it is stopping (E 11): a
        /// draining leader answered everything it proposed, so an acquire
        /// still pending was not granted, or (from a server that does not
        /// drain) was granted to its owner, which the same acquire sent again
        /// gets back (docs/protocol.md, How a connection ends).
        /// </summary>
        internal bool ShuttingDown { get { return Kind == FailKind.ServerError && Code == ErrorCode.ShuttingDown; } }

        internal string What()
        {
            switch (Kind)
            {
                case FailKind.Silent:
                    return "the server " + Addr + " sent nothing for " + Quiet.TotalMilliseconds + " ms (3 ping intervals, or idle intervals while nothing was in flight) and the connection was given up";
                case FailKind.NotLeader:
                    return Hint.Length > 0
                        ? "the server " + Addr + " stopped being the leader (new leader " + Hint + ") and ended the session"
                        : "the server " + Addr + " stopped being the leader and ended the session";
                case FailKind.ServerError:
                    return Cause != null ? Cause.Message : "the server " + Addr + " ended the session with an error";
                case FailKind.Protocol:
                    return "the server " + Addr + " sent an invalid frame (" + (Cause != null ? Cause.Message : "?") + ") and the connection was closed";
                case FailKind.Closed:
                    return "the broker was closed";
            }
            return "the connection to " + Addr + " was lost" + (Cause != null ? " (" + Cause.Message + ")" : "");
        }

        internal ErrorCode? Code
        {
            get { var se = Cause as ServerErrorException; return se != null ? se.Code : (ErrorCode?)null; }
        }
    }

    /// <summary>A final answer frame, or the failure that ended the connection.</summary>
    internal sealed class Answer
    {
        internal Frame F;
        internal ConnFailure Fail;
    }

    /// <summary>One request waiting for its final answer.</summary>
    internal sealed class Call
    {
        internal byte Type;
        internal uint Id;
        internal byte[] Owner;
        internal string Key;
        internal long Sent; // Stopwatch ticks just before its bytes were handed to the writer
        internal long Span; // acquire: Stopwatch ticks of wait + 2 × lease, the longest a grant of it can matter
        internal bool Abandoned; // the caller left; a late G is released (acquire)
        internal bool Queued;    // a Q was seen
        internal bool CoordAcquire;        // K: a coordination acquire (counts against the acquire slots)
        internal bool Large;               // K: over LargeRequest bytes of data: takes the connection's large slot
        internal bool LargeHeld;           // it holds the large slot now
        internal Action<Frame> Note;       // K: its Queued and Changed notifications (must not block: the reader calls it)
        internal Action<Frame> Watch;      // K: a describe with a watch: its Changed after the answer (must not block)
        internal readonly TaskCompletionSource<Answer> Res =
            new TaskCompletionSource<Answer>(TaskCreationOptions.RunContinuationsAsynchronously);

        internal Call(byte type, string key) { Type = type; Key = key; }
    }

    internal interface IConnHooks
    {
        /// <summary>A G answered an acquire whose caller left: release that exact token.</summary>
        void LateGrant(string key, ulong token);

        /// <summary>
        /// The connection of an acquire ended before its final answer: ask the
        /// leader, on a later connection, to end whatever owner holds or waits
        /// for on key (U), until the Stopwatch time until.
        /// </summary>
        void Orphaned(string key, byte[] owner, long until);
    }

    /// <summary>A failed handshake; Rejected marks refusals that will not go away by themselves.</summary>
    internal sealed class HelloException : Exception
    {
        internal readonly Exception Err; // what callers see (wrapped)
        internal readonly string Hint;
        internal readonly bool Rejected;
        internal HelloException(Exception err, string hint, bool rejected) : base(err.Message, err)
        {
            Err = err; Hint = hint ?? ""; Rejected = rejected;
        }
    }

    internal enum StartResult { Started, Gone }
}
