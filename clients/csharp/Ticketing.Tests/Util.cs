using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;

namespace Ticketing.Tests
{
    internal static class U
    {
        /// <summary>How long a test waits for something that must happen; reaching it is a failure ("hang"), never a timing assertion.</summary>
        public const int Patience = 30000;

        public static readonly TimeSpan S = TimeSpan.FromSeconds(1);

        public static TimeSpan Ms(int ms) { return TimeSpan.FromMilliseconds(ms); }

        public static TicketBrokerBuilder Builder(string addrs)
        {
            return TicketBroker.CreateBuilder().Addresses(addrs).BackoffForTests(Ms(10), Ms(200));
        }

        public static TicketBroker Connect(string addrs)
        {
            return Builder(addrs).Connect();
        }

        public static TicketBroker Ready(TicketBroker b)
        {
            Wait(b.WaitReadyAsync(TimeSpan.FromSeconds(20)));
            return b;
        }

        public static void Wait(Task t)
        {
            if (!t.Wait(Patience)) Assert.Fail("the call did not return within " + Patience + " ms: a hang");
        }

        public static T Get<T>(Task<T> t)
        {
            Wait(t);
            return t.Result;
        }

        /// <summary>Runs f and returns the exception it ends with, checking its type.</summary>
        public static TEx Throws<TEx>(Func<Task> f) where TEx : Exception
        {
            Task t;
            try { t = f(); }
            catch (Exception e) { return Check<TEx>(e); }
            return Ended<TEx>(t);
        }

        /// <summary>
        /// The exception a task ends with, as an awaiting caller sees it
        /// (GetAwaiter().GetResult(), not Wait(), so a cancellation keeps its
        /// own OperationCanceledException and message).
        /// </summary>
        public static TEx Ended<TEx>(Task t) where TEx : Exception
        {
            if (!((IAsyncResult)t).AsyncWaitHandle.WaitOne(Patience))
                Assert.Fail("the call did not return within " + Patience + " ms: a hang");
            try
            {
                t.GetAwaiter().GetResult();
            }
            catch (Exception e)
            {
                return Check<TEx>(e);
            }
            Assert.Fail("expected " + typeof(TEx).Name + ", the call succeeded");
            return null;
        }

        static TEx Check<TEx>(Exception e) where TEx : Exception
        {
            var x = e as TEx;
            if (x == null) Assert.Fail("expected " + typeof(TEx).Name + ", got " + e.GetType().Name + ": " + e);
            return x;
        }

        /// <summary>Polls cond until it holds; fails the test after Patience.</summary>
        public static void WaitUntil(string what, Func<bool> cond)
        {
            var sw = Stopwatch.StartNew();
            while (!cond())
            {
                if (sw.ElapsedMilliseconds > Patience) Assert.Fail("timed out waiting until " + what);
                Thread.Sleep(5);
            }
        }

        /// <summary>Collects release-observer reports.</summary>
        public sealed class Observed
        {
            public readonly List<string> Events = new List<string>();
            public readonly List<Exception> Errors = new List<Exception>();
            public void Report(string key, ulong token, Exception e)
            {
                lock (this)
                {
                    Events.Add(key + "/" + token + "/" + (e == null ? "ok" : e.GetType().Name));
                    Errors.Add(e);
                }
            }
            public bool Has(string ev) { lock (this) return Events.Contains(ev); }
            public override string ToString() { lock (this) return string.Join(", ", Events); }
        }
    }
}
