using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;

namespace Ticketing.Tests
{
    /// <summary>
    /// The C# runner of the language-neutral conformance suite
    /// (testdata/conformance/README.md): every scenario file is served by the
    /// scripted fake server, started as a process ($FAKETICKETD_BIN, which
    /// clients/csharp/test.sh builds), and driven through this client. The Go
    /// and Java runners drive their clients through the same files.
    /// </summary>
    [TestFixture]
    public class ConformanceTests
    {
        /// <summary>The scenarios' directory; TICKETING_CONFORMANCE overrides it (a scenario broken on purpose, say).</summary>
        static string Dir()
        {
            var env = Environment.GetEnvironmentVariable("TICKETING_CONFORMANCE");
            return !string.IsNullOrEmpty(env) ? env : Path.GetDirectoryName(VectorTests.RepoFile("testdata/conformance/README.md"));
        }

        public static IEnumerable<string> Scenarios()
        {
            return ConformanceRunner.Scenarios(Dir(), "scenarios");
        }

        /// <summary>The fake server process of one scenario: its address, the frames it received, its verdict.</summary>
        internal sealed class Fake : IDisposable
        {
            readonly Process process;
            readonly object mu = new object();
            readonly List<string> received = new List<string>();
            string addr, verdict, violations;

            public Fake(string scenario)
            {
                var bin = Environment.GetEnvironmentVariable("FAKETICKETD_BIN");
                if (string.IsNullOrEmpty(bin) || !File.Exists(bin))
                    throw new InvalidOperationException("FAKETICKETD_BIN is not set to the faketicketd binary; clients/csharp/test.sh builds it (go build -o PATH ./internal/faketicketd/cmd/faketicketd)");
                process = new Process
                {
                    StartInfo = new ProcessStartInfo(bin, "\"" + scenario + "\"")
                    {
                        UseShellExecute = false,
                        RedirectStandardInput = true,
                        RedirectStandardOutput = true,
                    },
                };
                process.Start();
                new Thread(ReadLines) { IsBackground = true }.Start();
                lock (mu)
                {
                    var end = DateTime.UtcNow.AddMilliseconds(U.Patience);
                    while (addr == null && !process.HasExited && DateTime.UtcNow < end) Monitor.Wait(mu, 100);
                }
                Assert.IsNotNull(addr, "faketicketd printed no address for " + scenario);
            }

            public string Addr { get { return addr; } }

            void ReadLines()
            {
                for (string line; (line = process.StandardOutput.ReadLine()) != null;)
                {
                    lock (mu)
                    {
                        if (line.StartsWith("addr ")) addr = line.Substring(5);
                        else if (line.StartsWith("recv ")) received.Add(line.Substring(5));
                        else if (line.StartsWith("verdict ")) verdict = line.Substring(8);
                        else if (line.StartsWith("violations")) violations = line.Substring(10).Trim();
                        Monitor.PulseAll(mu);
                    }
                }
            }

            /// <summary>Waits until count frames of this type have arrived; false after the bound.</summary>
            public bool AwaitFrame(string type, TimeSpan bound, int count = 1)
            {
                var end = DateTime.UtcNow + bound;
                lock (mu)
                {
                    while (received.Count(r => r == type) < count)
                    {
                        var left = end - DateTime.UtcNow;
                        if (left <= TimeSpan.Zero || process.HasExited) return false;
                        Monitor.Wait(mu, left);
                    }
                    return true;
                }
            }

            /// <summary>What the script found wrong so far, for a failed step's message ("" when nothing).</summary>
            public string Violations()
            {
                lock (mu) violations = null;
                process.StandardInput.WriteLine("violations");
                process.StandardInput.Flush();
                lock (mu)
                {
                    var end = DateTime.UtcNow.AddMilliseconds(U.Patience);
                    while (violations == null && !process.HasExited && DateTime.UtcNow < end) Monitor.Wait(mu, 100);
                    return string.IsNullOrEmpty(violations) ? "" : "\nthe server saw: " + violations;
                }
            }

            public string Check()
            {
                process.StandardInput.WriteLine("check");
                process.StandardInput.Flush();
                lock (mu)
                {
                    var end = DateTime.UtcNow.AddMilliseconds(U.Patience);
                    while (verdict == null && !process.HasExited && DateTime.UtcNow < end) Monitor.Wait(mu, 100);
                    return verdict;
                }
            }

            public void Dispose()
            {
                process.StandardInput.Close();
                if (!process.WaitForExit(10000)) process.Kill();
                process.Dispose();
            }
        }

        internal static string ErrorClass(Exception e)
        {
            var ae = e as AggregateException;
            if (ae != null) e = ae.Flatten().InnerExceptions[0];
            if (e is IndeterminateException) return "indeterminate";
            if (e is CapacityException) return "capacity";
            if (e is NotAcquiredException) return "not_acquired";
            if (e is NotHeldAfterRetryException) return "not_held_after_retry";
            if (e is NotHeldException) return "not_held";
            if (e is BudgetExceededException) return "budget_exceeded";
            if (e is UnauthenticatedException) return "unauthenticated";
            if (e is PermissionDeniedException) return "permission_denied";
            if (e is ArgumentException) return "invalid_argument";
            if (e is ClosedException) return "closed";
            if (e is OperationCanceledException) return "cancelled";
            if (e is WrongClusterException) return "wrong_cluster";
            if (e is UnavailableException) return "unavailable";
            return "unclassified";
        }

        /// <summary>A call's outcome as the scenarios spell it: its result, or "error CLASS (message)".</summary>
        static async Task<string> Outcome(Func<Task<string>> call)
        {
            try
            {
                return await call().ConfigureAwait(false);
            }
            catch (Exception e)
            {
                return "error " + ErrorClass(e) + " (" + e.Message + ")";
            }
        }

        internal static TimeSpan Ms(Dictionary<string, object> step, string name)
        {
            object v;
            return TimeSpan.FromMilliseconds(step.TryGetValue(name, out v) ? (double)(decimal)v : 0);
        }

        internal static string Str(Dictionary<string, object> d, string name)
        {
            object v;
            return d.TryGetValue(name, out v) ? (string)v : null;
        }

        /// <summary>The client of a scenario, with the settings its options name.</summary>
        internal static TicketBroker Client(string addr, Dictionary<string, object> options)
        {
            var b = U.Builder(addr);
            if (options == null) return b.Connect();
            if (options.ContainsKey("release_bound_ms")) b.ReleaseBoundForTests(Ms(options, "release_bound_ms"));
            if (options.ContainsKey("client_ping_ms")) b.OwnPingForTests(Ms(options, "client_ping_ms"));
            if (options.ContainsKey("answer_grace_ms")) b.AnswerGraceForTests(Ms(options, "answer_grace_ms"));
            if (options.ContainsKey("connect_wait_ms")) b.OperationTimeout(Ms(options, "connect_wait_ms"));
            if (options.ContainsKey("backoff_ms")) b.BackoffForTests(Ms(options, "backoff_ms"), Ms(options, "backoff_ms"));
            if (options.ContainsKey("cluster_id")) b.ClusterId((string)options["cluster_id"]);
            return b.Connect();
        }

        static readonly Lazy<Dictionary<string, Task>> Runs = ConformanceRunner.StartAll(Scenarios, Run);

        [Test, TestCaseSource("Scenarios")]
        public void Scenario(string name)
        {
            ConformanceRunner.Await(Runs, name);
        }

        static void Run(string name)
        {
            var file = Path.Combine(Dir(), name + ".json");
            var sc = (Dictionary<string, object>)MiniJson.Parse(File.ReadAllText(file));
            var rule = (string)sc["rule"];
            object options;
            sc.TryGetValue("options", out options);
            using (var fake = new Fake(file))
            using (var b = Client(fake.Addr, (Dictionary<string, object>)options))
            {
                Ticket ticket = null;
                var background = new Dictionary<string, Task<string>>();
                var steps = ((List<object>)sc["client"]).Cast<Dictionary<string, object>>().ToList();
                for (int i = 0; i < steps.Count; i++)
                {
                    var step = steps[i];
                    var op = (string)step["op"];
                    var within = Ms(step, "within_ms");
                    if (within == TimeSpan.Zero) within = TimeSpan.FromMilliseconds(U.Patience);
                    if (op == "await_frame")
                    {
                        var count = step.ContainsKey("count") ? (int)(decimal)step["count"] : 1;
                        Assert.IsTrue(fake.AwaitFrame(Str(step, "type"), within, count),
                            "step " + i + ": the servers did not receive " + count + " " + Str(step, "type") + " frames within " + within);
                        continue;
                    }
                    if (op == "pause")
                    {
                        // The scenario's idle time: no call, the connection stays as it is.
                        Thread.Sleep(Ms(step, "pause_ms"));
                        continue;
                    }
                    var cts = new CancellationTokenSource();
                    // OperationTimeout (connect_wait_ms) bounds calls with a token too.
                    var token = cts.Token;
                    Task<string> call;
                    switch (op)
                    {
                        case "acquire":
                            call = Outcome(async () =>
                            {
                                var t = await b.AcquireAsync(Str(step, "key"), Ms(step, "wait_ms"), Ms(step, "lease_ms"), Ms(step, "budget_ms"), token);
                                ticket = t;
                                return "granted " + t.Token;
                            });
                            break;
                        case "release":
                            call = Outcome(async () => { await ticket.ReleaseAsync(token); return "released"; });
                            break;
                        case "release_token":
                            call = Outcome(async () => { await b.ReleaseTokenAsync(Str(step, "key"), ulong.Parse(Str(step, "token")), token); return "released"; });
                            break;
                        case "wait_ready":
                            call = Outcome(async () => { await b.WaitReadyAsync(Ms(step, "timeout_ms"), token); return "ready"; });
                            break;
                        case "close":
                            call = Outcome(async () => { await b.CloseAsync(); return "closed"; });
                            break;
                        case "await":
                            call = background[Str(step, "call")];
                            break;
                        default:
                            call = Outcome(async () => (await b.DescribeAsync(Str(step, "key"), token)).Held ? "held" : "free");
                            break;
                    }
                    var cancelWhen = Str(step, "cancel_when");
                    if (cancelWhen != null)
                    {
                        if (step.ContainsKey("background"))
                            Task.Run(() => { if (fake.AwaitFrame(cancelWhen, within)) cts.Cancel(); });
                        else if (fake.AwaitFrame(cancelWhen, within))
                            cts.Cancel();
                    }
                    if (step.ContainsKey("background"))
                    {
                        background[Str(step, "background")] = call;
                        continue;
                    }
                    if (!call.Wait(within))
                    {
                        cts.Cancel();
                        Assert.Fail("step " + i + " (" + op + "): no outcome within " + within + " (the bound catches a hang)" + fake.Violations());
                    }
                    ConformanceRunner.Check(i, op, call.Result, step, result => result == "granted", fake.Violations, rule);
                }
                Assert.AreEqual("ok", fake.Check(), "frames sent\nrule: " + rule);
            }
        }
    }
}
