// A stand-in, for CI's compile check against the .NET Framework 4.6.1
// reference assemblies only, of the two types the netstandard2.0 package gets
// from its Microsoft.Bcl.AsyncInterfaces dependency (Ticketing.csproj): CI
// has no NuGet feed. Only the members the library uses are declared; the
// real package (or the runtime, on net8.0 and Mono) provides the types.
namespace System
{
    public interface IAsyncDisposable
    {
        System.Threading.Tasks.ValueTask DisposeAsync();
    }
}

namespace System.Threading.Tasks
{
    public struct ValueTask
    {
        public ValueTask(Task task) { }
    }
}
