using System;
using System.Runtime.CompilerServices;

// Tokens are ulong, which the CLS does not have.
[assembly: CLSCompliant(false)]
[assembly: InternalsVisibleTo("Ticketing.Tests")]

#if NETSTANDARD2_0
namespace System.Diagnostics.CodeAnalysis
{
    /// <summary>
    /// The nullable-analysis attributes for targets whose base library lacks
    /// it (netstandard2.0, .NET Framework); the compiler recognises it by name.
    /// </summary>
    [AttributeUsage(AttributeTargets.Field | AttributeTargets.Parameter | AttributeTargets.Property | AttributeTargets.ReturnValue, Inherited = false)]
    internal sealed class MaybeNullAttribute : Attribute { }

    /// <summary>The nullable-analysis attribute for a parameter that accepts null (see MaybeNullAttribute).</summary>
    [AttributeUsage(AttributeTargets.Field | AttributeTargets.Parameter | AttributeTargets.Property, Inherited = false)]
    internal sealed class AllowNullAttribute : Attribute { }
}
#endif
