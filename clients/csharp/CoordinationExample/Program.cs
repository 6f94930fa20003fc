// The coordination examples of the Ticketing C# documentation
// (clients/csharp/README.md, "Coordination"): a lock, an election and
// service discovery, in C# 7 (Mono's mcs, which CI builds with, cannot parse
// C# 8, so "await using" is written as try/finally with DisposeAsync).
// Usage: CoordinationExample.exe [host:port] (default 127.0.0.1:5225). CI runs
// it against a real ticketd, checks what it prints, and checks that it leaves
// nothing held. The README shows the lines between "example:" and "end".
using System;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Ticketing;
using Ticketing.Coordination;

static class Program
{
    static int Main(string[] args)
    {
        var broker = TicketBroker.Connect(args.Length > 0 ? args[0] : "127.0.0.1:5225");
        try
        {
            broker.WaitReadyAsync(TimeSpan.FromSeconds(5)).GetAwaiter().GetResult();
            RunAsync(broker, CancellationToken.None).GetAwaiter().GetResult();
        }
        finally
        {
            broker.Dispose();
        }
        return 0;
    }

    static Task RunNightlyAsync(ulong fencingToken, CancellationToken lost)
    {
        Console.WriteLine("nightly run with token " + fencingToken + (lost.IsCancellationRequested ? " (lost)" : ""));
        return Task.FromResult(true);
    }

    static async Task RunAsync(TicketBroker broker, CancellationToken cancellationToken)
    {
        // example: lock
        var coordination = new CoordinationClient(broker);   // does not own the broker
        try { await coordination.CreateNodeAsync("/jobs"); } // once per node
        catch (AlreadyExistsException) { }
        var session = await coordination.StartSessionAsync("/jobs", new SessionOptions { Timeout = TimeSpan.FromSeconds(10) });

        // A lock shared with Go and Java processes (the semaphore "recipe/mutex/nightly").
        var lease = await session.Mutex("nightly").AcquireAsync(cancellationToken);
        try
        {
            // Pass lease.Token (the fencing token) with every write; stop when the lease may be lost.
            await RunNightlyAsync(lease.Token, lease.LostToken);
        }
        finally { await lease.DisposeAsync(); }   // releases
        // end

        // example: election
        // An election: the leadership is a lease; its Token fences the leader's writes.
        var election = session.Election("scheduler");
        var leadership = await election.CampaignAsync(Encoding.UTF8.GetBytes("10.0.0.7:8080"), cancellationToken);
        try
        {
            var leader = await election.GetLeaderAsync(cancellationToken);   // Session, Token, GetData() of the leader
            Console.WriteLine("leader " + Encoding.UTF8.GetString(leader.GetData()) + " with token " + leader.Token);
            // Followers: election.Observe().NextAsync() returns the leader at each change.
        }
        finally { await leadership.DisposeAsync(); }   // resigns
        // end

        // example: discovery
        // Service discovery: each member registers its endpoint until its lease ends (or its session does).
        var api = session.Discovery("api");
        var registration = await api.RegisterAsync(Encoding.UTF8.GetBytes("10.0.0.7:8080"), cancellationToken);
        try
        {
            var members = api.Watch();                                // NextAsync: the members at each change
            foreach (var member in await members.NextAsync(cancellationToken))
                Console.WriteLine("member " + Encoding.UTF8.GetString(member.GetData()) + " of session " + member.Session);
        }
        finally { await registration.DisposeAsync(); }   // deregisters
        await coordination.DisposeAsync();               // ends the session; the broker stays open
        // end
    }
}
