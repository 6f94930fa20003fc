using System;
using System.Diagnostics;
using System.Text;

namespace Ticketing
{
    internal struct AcquireArgs
    {
        internal byte Wait, Lease;
        internal TimeSpan Budget;
    }

    /// <summary>
    /// The checks of a call's arguments, made by the call itself before
    /// anything is sent, and how durations are rounded up to the protocol's
    /// whole seconds and turned into the client's conservative deadline.
    /// </summary>
    internal static class Arguments
    {
        /// <summary>Rounds a non-negative duration up to whole seconds.</summary>
        internal static long CeilSeconds(TimeSpan d)
        {
            long s = d.Ticks / TimeSpan.TicksPerSecond;
            if (d.Ticks % TimeSpan.TicksPerSecond != 0) s++;
            return s;
        }

        /// <summary>
        /// Throws ArgumentNullException for a null key and ArgumentException
        /// (ParamName "key") for one outside 1..1024 UTF-8 bytes.
        /// </summary>
        internal static void CheckKey(string key, string op)
        {
            if (key == null) throw new ArgumentNullException("key", TicketBroker.Op(op, key) + "the key is null; nothing was sent");
            int klen = Encoding.UTF8.GetByteCount(key);
            if (klen == 0 || klen > TicketBroker.MaxKeyBytes)
                throw new ArgumentException(TicketBroker.Op(op, key) + "the key is " + klen + " bytes, it must be 1.." + TicketBroker.MaxKeyBytes + " bytes; nothing was sent", "key");
        }

        static ArgumentOutOfRangeException OutOfRange(string param, object value, string key, string why)
        {
            return new ArgumentOutOfRangeException(param, value, TicketBroker.Op("acquire", key) + why + "; nothing was sent");
        }

        internal static AcquireArgs CheckAcquire(string key, TimeSpan wait, TimeSpan lease, TimeSpan budget)
        {
            CheckKey(key, "acquire");
            long maxWait = CeilSeconds(TicketBroker.MaxWait), minLease = CeilSeconds(TicketBroker.MinLease), maxLease = CeilSeconds(TicketBroker.MaxLease);
            long l = CeilSeconds(lease);
            if (wait < TimeSpan.Zero)
                throw OutOfRange("wait", wait, key, "wait " + Secs(wait) + " is negative; it must be 0.." + maxWait + " s (0 is one immediate attempt)");
            if (CeilSeconds(wait) > maxWait)
                throw OutOfRange("wait", wait, key, "wait " + Secs(wait) + " (" + CeilSeconds(wait) + " s rounded up) is longer than the maximum " + maxWait + " s");
            if (lease <= TimeSpan.Zero)
                throw OutOfRange("lease", lease, key, "lease " + Secs(lease) + " must be " + minLease + ".." + maxLease + " s");
            if (l > maxLease)
                throw OutOfRange("lease", lease, key, "lease " + Secs(lease) + " (" + l + " s rounded up) is longer than the maximum " + maxLease + " s");
            if (budget < TimeSpan.Zero)
                throw OutOfRange("budget", budget, key, "work budget " + Secs(budget) + " is negative; it must be 0 or more");
            // Rounded up like wait and lease: a fraction of a second of work is planned as the whole second.
            long bs = CeilSeconds(budget);
            if (bs > maxLease)
                throw OutOfRange("budget", budget, key, "work budget " + Secs(budget) + " is " + bs + " s rounded up, longer than " + maxLease + " s: work longer than the longest lease is not supported");
            // Refused here rather than after a token was spent on a ticket that must be given back.
            TimeSpan most = MaxBudget(l);
            if (TimeSpan.FromSeconds(bs) > most)
                throw OutOfRange("budget", budget, key, "work budget " + Secs(budget) + " (" + bs + " s rounded up) cannot fit in a " + l +
                    " s lease: even a ticket granted at once has at most " + Secs(most) + " of conservative time left (" + TicketBroker.ClockDriftPercent +
                    "% clock allowance, " + Secs(TicketBroker.ClockDriftMargin) + " margin); use a budget of at most " + (most.Ticks / TimeSpan.TicksPerSecond) + " s or a longer lease");
            return new AcquireArgs { Wait = (byte)CeilSeconds(wait), Lease = (byte)l, Budget = TimeSpan.FromSeconds(bs) };
        }

        /// <summary>
        /// The longest work budget a lease of leaseSeconds whole seconds can
        /// ever satisfy: the conservative remaining time of a grant made at
        /// once, with nothing queued, measured from the send (the deadline's
        /// formula in ticks, not Stopwatch units).
        /// </summary>
        internal static TimeSpan MaxBudget(long leaseSeconds)
        {
            long spanTicks = leaseSeconds * TimeSpan.TicksPerSecond;
            spanTicks -= spanTicks * TicketBroker.ClockDriftPercent / 100;
            spanTicks -= TicketBroker.ClockDriftMargin.Ticks;
            return TimeSpan.FromTicks(spanTicks);
        }

        /// <summary>A duration in seconds, the unit of the protocol and the docs.</summary>
        internal static string Secs(TimeSpan d)
        {
            return ((decimal)d.Ticks / TimeSpan.TicksPerSecond).ToString("0.#######", System.Globalization.CultureInfo.InvariantCulture) + " s";
        }

        /// <summary>
        /// The latest moment, on this machine's monotonic clock (Stopwatch
        /// ticks), at which the client may still believe it holds the ticket:
        /// sent + (lease + queued) × (1 − 1 %) − 100 ms. sent precedes the
        /// server's receipt, and the server starts the lease no earlier than
        /// receipt + queued, so its lease ends no earlier than sent + queued +
        /// lease on its clock; the 1 % covers clock rate differences and the
        /// 100 ms millisecond truncation.
        /// </summary>
        internal static long ConservativeDeadline(long sent, uint leaseMs, uint queuedMs)
        {
            long spanTicks = ((long)leaseMs + queuedMs) * TimeSpan.TicksPerMillisecond;
            spanTicks -= spanTicks * TicketBroker.ClockDriftPercent / 100;
            spanTicks -= TicketBroker.ClockDriftMargin.Ticks;
            return sent + (long)(spanTicks * ((double)Stopwatch.Frequency / TimeSpan.TicksPerSecond));
        }

        internal static TimeSpan SinceTicks(long from, long to)
        {
            return TimeSpan.FromTicks((long)((to - from) * ((double)TimeSpan.TicksPerSecond / Stopwatch.Frequency)));
        }
    }
}
