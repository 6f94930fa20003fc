using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Reflection;
using NUnit.Framework;
using Ticketing.Wire;

namespace Ticketing.Tests
{
    /// <summary>
    /// This client's protocol constants against the constants section of
    /// testdata/vectors.json, which the Go generator writes from the
    /// protocol's one definition. Driven by the file: a code, frame type or
    /// reason the protocol adds fails here until this client defines it, and
    /// one this client defines that the protocol does not know fails too.
    /// </summary>
    [TestFixture]
    public class ConstantsTests
    {
        static Dictionary<string, object> Constants()
        {
            var file = (Dictionary<string, object>)MiniJson.Parse(File.ReadAllText(VectorTests.RepoFile("testdata/vectors.json")));
            object c;
            Assert.IsTrue(file.TryGetValue("constants", out c), "testdata/vectors.json has no constants section");
            return (Dictionary<string, object>)c;
        }

        static List<Dictionary<string, object>> List(string name)
        {
            var l = ((List<object>)Constants()[name]).Cast<Dictionary<string, object>>().ToList();
            Assert.IsNotEmpty(l, "constants." + name + " is empty");
            return l;
        }

        static long Limit(string group, string name) { return (long)(decimal)((Dictionary<string, object>)Constants()[group])[name]; }

        /// <summary>The file's snake_case name compared with a C# name: duplicate_id is DuplicateId.</summary>
        static string Key(string name) { return name.Replace("_", "").ToLowerInvariant(); }

        /// <summary>Each entry must be defined with its value; nothing else may be defined.</summary>
        static void Check(string what, Dictionary<string, long> defined, IEnumerable<Dictionary<string, object>> entries, string valueKey)
        {
            var left = defined.ToDictionary(kv => Key(kv.Key), kv => kv);
            var problems = new List<string>();
            foreach (var e in entries)
            {
                var name = (string)e["name"];
                var v = e[valueKey];
                long want = v is string ? (long)((string)v)[0] : (long)(decimal)v;
                KeyValuePair<string, long> got;
                if (!left.TryGetValue(Key(name), out got))
                    problems.Add(what + " " + name + " = " + want + " is not defined");
                else if (got.Value != want)
                    problems.Add(what + "." + got.Key + " is " + got.Value + ", the protocol says " + want);
                left.Remove(Key(name));
            }
            foreach (var kv in left.Values)
                problems.Add(what + "." + kv.Key + " is not in the protocol's constants");
            Assert.IsEmpty(problems, string.Join("\n", problems));
        }

        static Dictionary<string, long> EnumValues(Type t)
        {
            return Enum.GetNames(t).ToDictionary(n => n, n => Convert.ToInt64(Enum.Parse(t, n)));
        }

        [Test]
        public void ErrorCodesAreTheProtocols()
        {
            Check("ErrorCode", EnumValues(typeof(ErrorCode)), List("error_codes"), "code");
        }

        [Test]
        public void FrameTypesAreTheProtocols()
        {
            var defined = typeof(FrameType).GetFields(BindingFlags.Public | BindingFlags.Static)
                .Where(f => f.IsLiteral && f.FieldType == typeof(byte))
                .ToDictionary(f => f.Name, f => (long)(byte)f.GetRawConstantValue());
            Check("FrameType", defined, List("frame_types"), "letter");
        }

        [Test]
        public void ReasonsAreTheProtocols()
        {
            Check("CapacityReason", EnumValues(typeof(CapacityReason)), List("capacity_reasons"), "value");
            Check("PermissionReason", EnumValues(typeof(PermissionReason)), List("forbidden_reasons"), "value");
        }

        [Test]
        public void LimitsAreTheProtocols()
        {
            Assert.AreEqual(Limit("limits", "version"), Codec.Version);
            Assert.AreEqual(Limit("limits", "max_frame"), Codec.MaxFrame);
            Assert.AreEqual(Limit("limits", "max_key"), TicketBroker.MaxKeyBytes);
            Assert.AreEqual(Limit("limits", "max_token"), Codec.MaxToken);
            Assert.AreEqual(TimeSpan.FromSeconds(Limit("limits", "max_wait_s")), TicketBroker.MaxWait);
            Assert.AreEqual(TimeSpan.FromSeconds(Limit("limits", "min_lease_s")), TicketBroker.MinLease);
            Assert.AreEqual(TimeSpan.FromSeconds(Limit("limits", "max_lease_s")), TicketBroker.MaxLease);
            Assert.AreEqual(Limit("flags", "hello_admin"), Codec.HelloAdmin);
            Assert.AreEqual(Limit("flags", "ready_leader"), Codec.ReadyLeader);
            Assert.AreEqual(Limit("flags", "ready_sessions"), Codec.ReadySessions);
            Assert.AreEqual(Limit("flags", "hello_cluster_id"), Codec.HelloClusterId);
            Assert.AreEqual(Limit("flags", "ready_cluster_id"), Codec.ReadyClusterId);
            Assert.AreEqual(Limit("flags", "hello_idle_pings"), Codec.HelloIdlePings);
            Assert.AreEqual(Limit("flags", "ready_idle_pings"), Codec.ReadyIdlePings);
            Assert.AreEqual(Limit("limits", "cluster_id_len"), Codec.ClusterIdLen);
        }
    }
}
