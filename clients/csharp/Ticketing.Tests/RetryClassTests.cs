using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Text.RegularExpressions;
using NUnit.Framework;

namespace Ticketing.Tests
{
    /// <summary>
    /// RetryClass is the Go retry package's class list, read from this
    /// repository: the same names in the same order (retry/class.go's
    /// classNames) and the same "retried" rule (retry/doc.go's table; a class
    /// the table does not list is never retried). The client's exceptions
    /// report the classes the Go client's errors report.
    /// </summary>
    [TestFixture]
    public class RetryClassTests
    {
        [Test]
        public void NamesAndOrderAreTheGoPackages()
        {
            var src = File.ReadAllText(VectorTests.RepoFile("retry/class.go"));
            int start = src.IndexOf("var classNames", StringComparison.Ordinal);
            var block = src.Substring(start, src.IndexOf('}', start) - start);
            var goNames = Regex.Matches(block, @":\s*""([A-Z_]+)""").Cast<Match>().Select(m => m.Groups[1].Value).ToList();
            Assert.Greater(goNames.Count, 10, "could not read the class names from retry/class.go");
            var names = Enum.GetValues(typeof(RetryClass)).Cast<RetryClass>().Select(c => c.RetryClassName()).ToList();
            CollectionAssert.AreEqual(goNames, names);
        }

        [Test]
        public void RetriedAsTheGoTable()
        {
            var table = new Dictionary<string, string>();
            var row = new Regex(@"^//\t([A-Z_]+)\s+(always|if idempotent)\s+(fast|slow|none)\b");
            foreach (var line in File.ReadAllLines(VectorTests.RepoFile("retry/doc.go")))
            {
                var m = row.Match(line);
                if (m.Success) table[m.Groups[1].Value] = m.Groups[2].Value;
            }
            Assert.GreaterOrEqual(table.Count, 9, "could not read the class table from retry/doc.go");
            foreach (RetryClass c in Enum.GetValues(typeof(RetryClass)))
            {
                string retried;
                if (!table.TryGetValue(c.RetryClassName(), out retried))
                {
                    Assert.IsFalse(c.Retryable(true), c + " is not in the Go table, so it is never retried");
                    continue;
                }
                Assert.IsTrue(c.Retryable(true), c.ToString());
                Assert.AreEqual(retried == "always", c.Retryable(false), c + " retried " + retried);
            }
        }

        [Test]
        public void ClientExceptionsReportTheGoClientsClasses()
        {
            Assert.AreEqual(RetryClass.Overloaded, new CapacityException("b", CapacityReason.Held).RetryClass);
            Assert.AreEqual(RetryClass.Undetermined, new IndeterminateException("i", null).RetryClass);
            Assert.AreEqual(RetryClass.NonRetryable, new IndeterminateException("i", null) { BrokerClosed = true }.RetryClass,
                "unknown because the broker was closed: the Go client's ErrClosed wins");
            Assert.AreEqual(RetryClass.TransportUnavailable, new UnavailableException("u", null).RetryClass);
            Assert.AreEqual(RetryClass.InvalidArgument, RetryClasses.Of(new ArgumentOutOfRangeException("wait")));
            Assert.AreEqual(RetryClass.Canceled, RetryClasses.Of(new OperationCanceledException()));
            Assert.AreEqual(RetryClass.Overloaded, RetryClasses.Of(new CapacityException("b", CapacityReason.Held)));
            Assert.AreEqual(RetryClass.NonRetryable, new PermissionDeniedException("f", PermissionReason.Key).RetryClass);
            Assert.AreEqual(RetryClass.NonRetryable, new NotAcquiredException("w").RetryClass);
            Assert.AreEqual(RetryClass.NonRetryable, new NotHeldException("n").RetryClass);
            Assert.AreEqual(RetryClass.NonRetryable, new BudgetExceededException("b", 1).RetryClass);
            Assert.AreEqual(RetryClass.NonRetryable, new ClosedException("c").RetryClass);
            Assert.AreEqual(RetryClass.NonRetryable, new UnauthenticatedException("u", null).RetryClass);
        }
    }
}
