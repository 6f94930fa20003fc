using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;

namespace Ticketing.Tests
{
    /// <summary>
    /// What the ticket and coordination conformance runners share: listing a
    /// directory's scenarios, running them all at once a few at a time, and
    /// holding a step's outcome against what the scenario expects.
    /// </summary>
    internal static class ConformanceRunner
    {
        /// <summary>How many scenarios run at once: most of a scenario's time is waiting (the Go runner does the same).</summary>
        internal const int Parallel = 8;

        /// <summary>The scenario names (file names without .json) in dir, in order; none is an error naming the directory.</summary>
        internal static IEnumerable<string> Scenarios(string dir, string what)
        {
            var files = Directory.GetFiles(dir, "*.json").OrderBy(f => f, StringComparer.Ordinal).ToList();
            if (files.Count == 0) throw new FileNotFoundException("no " + what + " in " + dir);
            return files.Select(f => Path.GetFileNameWithoutExtension(f));
        }

        /// <summary>Every scenario, started at once (Parallel at a time) on first use; each test waits for its own.</summary>
        internal static Lazy<Dictionary<string, Task>> StartAll(Func<IEnumerable<string>> scenarios, Action<string> run)
        {
            return new Lazy<Dictionary<string, Task>>(() =>
            {
                var slots = new SemaphoreSlim(Parallel);
                return scenarios().ToDictionary(n => n, n => Task.Factory.StartNew(() =>
                {
                    slots.Wait();
                    try { run(n); }
                    finally { slots.Release(); }
                }, TaskCreationOptions.LongRunning));
            });
        }

        /// <summary>Waits for one scenario's run and fails the test with its own failure, not a wrapper's.</summary>
        internal static void Await(Lazy<Dictionary<string, Task>> runs, string name)
        {
            try
            {
                runs.Value[name].Wait();
            }
            catch (AggregateException e)
            {
                System.Runtime.ExceptionServices.ExceptionDispatchInfo.Capture(e.InnerException).Throw();
            }
        }

        /// <summary>
        /// Holds step i's outcome ("RESULT [TOKEN]" or "error CLASS (message)")
        /// against its expect: the result or error class, the token when the
        /// scenario names one (else tokened says which results carry a token to
        /// drop), and the names the error's message must hold; violations asks
        /// the fake server what it saw wrong, only for a failure's message.
        /// </summary>
        internal static void Check(int i, string op, string outcome, Dictionary<string, object> step, Func<string, bool> tokened, Func<string> violations, string rule)
        {
            var detail = outcome.Contains(" (") ? outcome.Substring(outcome.IndexOf(" (", StringComparison.Ordinal)) : "";
            var got = outcome.Substring(0, outcome.Length - detail.Length);
            var expect = (Dictionary<string, object>)step["expect"];
            var want = expect.ContainsKey("error") ? "error " + expect["error"] : (string)expect["result"];
            if (expect.ContainsKey("token")) want += " " + expect["token"];
            else if (got.IndexOf(' ') > 0 && tokened(got.Substring(0, got.IndexOf(' ')))) got = got.Substring(0, got.IndexOf(' '));
            if (want != got) Assert.AreEqual(want, got, "step " + i + " (" + op + ")" + detail + violations() + "\nrule: " + rule);
            if (expect.ContainsKey("names"))
                foreach (var named in (List<object>)expect["names"])
                    if (!detail.Contains((string)named))
                        Assert.Fail("step " + i + " (" + op + "): the error" + detail + " does not name " + named + "\nrule: " + rule);
        }
    }
}
