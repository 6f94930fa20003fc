using System;
using System.Diagnostics.CodeAnalysis;

namespace Ticketing
{
    /// <summary>A session with a server began (TicketBroker.Connected).</summary>
    public sealed class ConnectedEventArgs : EventArgs
    {
        internal ConnectedEventArgs(string address, string nodeId, bool reconnect)
        {
            Address = address; NodeId = nodeId; Reconnect = reconnect;
        }

        /// <summary>The server (host:port) the session is with.</summary>
        public string Address { get; private set; }

        /// <summary>The server's node id, from its hello answer.</summary>
        public string NodeId { get; private set; }

        /// <summary>True when an earlier session of this broker ended before this one (a reconnect).</summary>
        public bool Reconnect { get; private set; }
    }

    /// <summary>A session with a server ended (TicketBroker.Disconnected).</summary>
    public sealed class DisconnectedEventArgs : EventArgs
    {
        internal DisconnectedEventArgs(string address, string reason, Exception cause, string leaderHint)
        {
            Address = address; Reason = reason; Cause = cause; LeaderHint = leaderHint;
        }

        /// <summary>The server (host:port) the session was with.</summary>
        public string Address { get; private set; }

        /// <summary>Why it ended, in words.</summary>
        public string Reason { get; private set; }

        /// <summary>The underlying failure, when there was one; otherwise null.</summary>
        [MaybeNull]
        public Exception Cause { get; private set; }

        /// <summary>The leader the server named when it stopped leading (M); empty otherwise.</summary>
        public string LeaderHint { get; private set; }
    }

    /// <summary>The broker's session moved to another server than the one before (TicketBroker.LeaderChanged).</summary>
    public sealed class LeaderChangedEventArgs : EventArgs
    {
        internal LeaderChangedEventArgs(string previousAddress, string address)
        {
            PreviousAddress = previousAddress; Address = address;
        }

        /// <summary>The server of the previous session.</summary>
        public string PreviousAddress { get; private set; }

        /// <summary>The server of the new session: the leader now.</summary>
        public string Address { get; private set; }
    }

    /// <summary>A release the caller does not await failed (TicketBroker.ReleaseFailed).</summary>
    public sealed class ReleaseFailedEventArgs : EventArgs
    {
        internal ReleaseFailedEventArgs(string key, ulong token, Exception exception)
        {
            Key = key; Token = token; Exception = exception;
        }

        /// <summary>The ticket's key.</summary>
        public string Key { get; private set; }

        /// <summary>The ticket's token.</summary>
        public ulong Token { get; private set; }

        /// <summary>
        /// What went wrong: NotHeldException (the ticket had already ended),
        /// ReleaseDroppedException (the queue was full), ClosedException (the
        /// broker closed first), IndeterminateException or
        /// UnavailableException (no final answer within ReleaseBound).
        /// </summary>
        public Exception Exception { get; private set; }
    }
}
