// The basic example of the Ticketing C# documentation, in C# 7: Mono's mcs,
// which CI builds with, cannot parse C# 8, so
//     await using var ticket = await broker.AcquireAsync(...);
// is written as what it means, try { ... } finally { await ticket.DisposeAsync(); }.
// Usage: Example.exe [host:port] (default 127.0.0.1:5225). CI runs it against
// a real ticketd and checks that the key is free afterwards.
using System;
using System.Threading.Tasks;
using Ticketing;

static class Program
{
    static int Main(string[] args)
    {
        RunAsync(args.Length > 0 ? args[0] : "127.0.0.1:5225").GetAwaiter().GetResult();
        return 0;
    }

    static async Task RunAsync(string address)
    {
        var broker = TicketBroker.Connect(address);
        await broker.WaitReadyAsync(TimeSpan.FromSeconds(5));

        var ticket = await broker.AcquireAsync(
            "key", TimeSpan.FromSeconds(5), TimeSpan.FromSeconds(30), TimeSpan.FromSeconds(2));
        try
        {
            var token = ticket.Token;
            // In the same DB transaction: verify/update token high-water and perform the business write.
            Console.WriteLine("token " + token);
        }
        finally
        {
            await ticket.DisposeAsync();
        }
    }
}
