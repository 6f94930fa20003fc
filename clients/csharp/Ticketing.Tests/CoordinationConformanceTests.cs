using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;
using Ticketing.Coordination;

namespace Ticketing.Tests
{
    /// <summary>
    /// The C# runner of the coordination scenarios of the language-neutral
    /// conformance suite (testdata/conformance/coordination, described in
    /// testdata/conformance/README.md): each scenario is served by the
    /// faketicketd command and driven through a CoordinationClient over a
    /// broker, as the Go and Java runners drive theirs.
    /// </summary>
    [TestFixture]
    public class CoordinationConformanceTests
    {
        /// <summary>The scenarios' directory; TICKETING_CONFORMANCE_COORDINATION overrides it (the pending ones, or a scenario broken on purpose).</summary>
        static string Dir()
        {
            var env = Environment.GetEnvironmentVariable("TICKETING_CONFORMANCE_COORDINATION");
            return !string.IsNullOrEmpty(env) ? env : Path.Combine(Path.GetDirectoryName(VectorTests.RepoFile("testdata/conformance/README.md")), "coordination");
        }

        public static IEnumerable<string> Scenarios()
        {
            return ConformanceRunner.Scenarios(Dir(), "coordination scenarios");
        }

        /// <summary>An exception's class as the scenarios spell it: the coordination classes first, then the ticket ones.</summary>
        static string ErrorClass(Exception e)
        {
            var ae = e as AggregateException;
            if (ae != null) e = ae.Flatten().InnerExceptions[0];
            if (e is DeadlinePassedException) return "deadline_passed";
            if (e is LeaseLostException) return "lost";
            if (e is WrongKindException) return "wrong_kind";
            if (e is NotFoundException) return "not_found";
            if (e is AlreadyExistsException) return "already_exists";
            // Arguments the client checks itself are refused before sending, the .NET way.
            if (e is BadRequestException || e is ArgumentException) return "bad_request";
            if (e is PreconditionFailedException) return "precondition_failed";
            if (e is AbortedException) return "aborted";
            if (e is SessionExpiredException) return "session_expired";
            if (e is BadSessionException) return "bad_session";
            if (e is UnauthorizedException) return "unauthorized";
            if (e is LimitExceededException) return "limit_exceeded";
            return ConformanceTests.ErrorClass(e);
        }

        static string Sized(Dictionary<string, object> step, string field, string bytesField, string prefix)
        {
            object n;
            if (!step.TryGetValue(bytesField, out n)) return ConformanceTests.Str(step, field) ?? "";
            return prefix + new string('x', (int)(decimal)n - prefix.Length);
        }

        static long Num(Dictionary<string, object> step, string name)
        {
            object v;
            return step.TryGetValue(name, out v) ? (long)(decimal)v : 0;
        }

        static bool Flag(Dictionary<string, object> step, string name)
        {
            object v;
            return step.TryGetValue(name, out v) && v is bool && (bool)v;
        }

        static readonly Lazy<Dictionary<string, Task>> Runs = ConformanceRunner.StartAll(Scenarios, Run);

        [Test, TestCaseSource("Scenarios")]
        public void Scenario(string name)
        {
            ConformanceRunner.Await(Runs, name);
        }

        /// <summary>The calls of one scenario; calls may run in the background, so the last session and lease are guarded.</summary>
        sealed class Calls
        {
            readonly CoordinationClient c;
            readonly object mu = new object();
            CoordinationSession session;
            SemaphoreLease lease;

            public Calls(CoordinationClient c) { this.c = c; }

            public CoordinationSession Session { get { lock (mu) return session; } }
            SemaphoreLease Lease { get { lock (mu) return lease; } }

            SemaphoreLease Took(SemaphoreLease l)
            {
                if (l != null) lock (mu) lease = l;
                return l;
            }

            /// <summary>One step's call, bounded by within as the Go runner bounds it: its result, or "error CLASS (message)".</summary>
            public async Task<string> Call(Dictionary<string, object> step, TimeSpan within)
            {
                using (var cts = new CancellationTokenSource(within))
                {
                    var ct = cts.Token;
                    try
                    {
                        return await CallCore(step, within, ct).ConfigureAwait(false);
                    }
                    catch (Exception e)
                    {
                        return "error " + ErrorClass(e) + " (" + e.Message + ")";
                    }
                }
            }

            async Task<string> CallCore(Dictionary<string, object> step, TimeSpan within, CancellationToken ct)
            {
                var data = new byte[Num(step, "data_bytes")];
                var path = Sized(step, "path", "path_bytes", "/");
                var name = Sized(step, "name", "name_bytes", "");
                var s = Session;
                switch ((string)step["op"])
                {
                    case "session":
                        var started = await c.StartSessionAsync(path, new SessionOptions { Timeout = ConformanceTests.Ms(step, "session_timeout_ms") }, ct).ConfigureAwait(false);
                        lock (mu) session = started;
                        return "attached";
                    case "close_session":
                        await s.CloseAsync(ct).ConfigureAwait(false);
                        return "closed";
                    case "create_node":
                        await c.CreateNodeAsync(path, null, ct).ConfigureAwait(false);
                        return "ok";
                    case "describe_node":
                        await c.DescribeNodeAsync(path, ct).ConfigureAwait(false);
                        return "ok";
                    case "create_semaphore":
                        await s.CreateSemaphoreAsync(name, (ulong)Num(step, "limit"), data, ct).ConfigureAwait(false);
                        return "ok";
                    case "update_semaphore":
                        await s.UpdateSemaphoreAsync(name, data, ct).ConfigureAwait(false);
                        return "ok";
                    case "delete_semaphore":
                        await s.DeleteSemaphoreAsync(name, false, ct).ConfigureAwait(false);
                        return "ok";
                    case "acquire_semaphore":
                        var o = new AcquireOptions { Timeout = ConformanceTests.Ms(step, "wait_ms"), Data = data, Exclusive = Flag(step, "exclusive"), Ephemeral = Flag(step, "ephemeral") };
                        if (Num(step, "count") > 0) o.Count = (ulong)Num(step, "count");
                        return "acquired " + Took(await s.AcquireSemaphoreAsync(name, o, ct).ConfigureAwait(false)).Token;
                    case "mutex_lock":
                        return "acquired " + Took(await s.Mutex(name).AcquireAsync(ct).ConfigureAwait(false)).Token;
                    case "mutex_try_lock":
                        var held = Took(await s.Mutex(name).TryAcquireAsync(ct).ConfigureAwait(false));
                        return held == null ? "not_acquired" : "acquired " + held.Token;
                    case "election_campaign":
                        return "leading " + Took(await s.Election(name).CampaignAsync(data, ct).ConfigureAwait(false)).Token;
                    case "release_semaphore":
                        await Lease.ReleaseAsync(ct).ConfigureAwait(false);
                        return "released";
                    case "lease_valid":
                        // Checked on the spot against the session's deadline.
                        return Lease.IsValid ? "valid" : "invalid";
                    case "lease_ended":
                        var l = Lease;
                        var ended = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                        using (l.LostToken.Register(() => ended.TrySetResult(true)))
                        using (ct.Register(() => ended.TrySetResult(false)))
                        {
                            if (!await ended.Task.ConfigureAwait(false)) return "still valid";
                        }
                        return l.LossReason == null ? "error released" : "error " + ErrorClass(l.LossReason) + " (" + l.LossReason.Message + ")";
                }
                return "op " + step["op"] + " is not a coordination op";
            }
        }

        static void Run(string name)
        {
            var file = Path.Combine(Dir(), name + ".json");
            var sc = (Dictionary<string, object>)MiniJson.Parse(File.ReadAllText(file));
            var rule = name + ": " + (string)sc["rule"];
            object options;
            sc.TryGetValue("options", out options);
            using (var fake = new ConformanceTests.Fake(file))
            using (var b = ConformanceTests.Client(fake.Addr, (Dictionary<string, object>)options))
            {
                var c = new CoordinationClient(b);
                var calls = new Calls(c);
                try
                {
                    var background = new Dictionary<string, Task<string>>();
                    var steps = ((List<object>)sc["client"]).Cast<Dictionary<string, object>>().ToList();
                    for (int i = 0; i < steps.Count; i++)
                    {
                        var step = steps[i];
                        var op = (string)step["op"];
                        var within = ConformanceTests.Ms(step, "within_ms");
                        if (within == TimeSpan.Zero) within = TimeSpan.FromMilliseconds(U.Patience);
                        if (op == "await_frame")
                        {
                            var count = step.ContainsKey("count") ? (int)(decimal)step["count"] : 1;
                            Assert.IsTrue(fake.AwaitFrame(ConformanceTests.Str(step, "type"), within, count),
                                "step " + i + ": the servers did not receive " + count + " " + ConformanceTests.Str(step, "type") + " frames within " + within + fake.Violations());
                            continue;
                        }
                        Task<string> call;
                        if (op == "await") call = background[ConformanceTests.Str(step, "call")];
                        else
                        {
                            call = Task.Run(() => calls.Call(step, within));
                            if (step.ContainsKey("background"))
                            {
                                background[ConformanceTests.Str(step, "background")] = call;
                                continue;
                            }
                        }
                        if (!call.Wait(within + TimeSpan.FromSeconds(1)))
                            Assert.Fail("step " + i + " (" + op + "): no outcome within " + within + " (the bound catches a hang)" + fake.Violations());
                        ConformanceRunner.Check(i, op, call.Result, step, result => result == "acquired" || result == "leading", fake.Violations, rule);
                    }
                    Assert.AreEqual("ok", fake.Check(), "frames sent\nrule: " + rule);
                }
                finally
                {
                    var s = calls.Session;
                    if (s != null) s.DisposeAsync().AsTask().Wait(TimeSpan.FromSeconds(6));
                    c.Dispose();
                }
            }
        }
    }
}
