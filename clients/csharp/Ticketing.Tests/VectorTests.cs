using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using NUnit.Framework;
using Ticketing.Wire;

namespace Ticketing.Tests
{
    /// <summary>
    /// The codec against testdata/vectors.json (docs/protocol.md, "Test
    /// vectors"): every valid vector decodes to exactly its frame and its frame
    /// encodes to exactly its bytes; every decode vector is refused with its
    /// code (code 2 without reading past the length prefix); every validate
    /// vector decodes and is then refused by the range checks (code 8).
    /// </summary>
    [TestFixture]
    public class VectorTests
    {
        static List<Dictionary<string, object>> all;

        internal static string RepoFile(string rel)
        {
            var env = Environment.GetEnvironmentVariable("TICKETING_REPO");
            var dirs = new List<string>();
            if (!string.IsNullOrEmpty(env)) dirs.Add(env);
            dirs.Add(Directory.GetCurrentDirectory());
            dirs.Add(AppDomain.CurrentDomain.BaseDirectory);
            foreach (var start in dirs)
            {
                for (var d = new DirectoryInfo(start); d != null; d = d.Parent)
                {
                    var f = Path.Combine(d.FullName, rel);
                    if (File.Exists(f)) return f;
                }
            }
            throw new FileNotFoundException(rel + " not found above " + string.Join(", ", dirs) + "; set TICKETING_REPO to the repository root");
        }

        static List<Dictionary<string, object>> Vectors()
        {
            if (all == null)
            {
                var file = (Dictionary<string, object>)MiniJson.Parse(File.ReadAllText(RepoFile("testdata/vectors.json")));
                var list = (List<object>)file["vectors"];
                // Every vector is checked except the coordination requests
                // that only a server's range checks refuse (a K body's
                // sub-op, flags and lengths): this client encodes those
                // bodies and never decodes them (docs/protocol.md, "Test vectors").
                all = list.Cast<Dictionary<string, object>>().Where(v =>
                {
                    var hex = (string)v["hex"];
                    var type = hex.Length >= 10 ? hex.Substring(8, 2) : "";
                    object stage;
                    return !(type == "4b" && v.TryGetValue("stage", out stage) && (string)stage == "validate");
                }).ToList();
            }
            return all;
        }

        public static IEnumerable<string> VectorNames()
        {
            return Vectors().Select(v => (string)v["name"]).ToList();
        }

        static Dictionary<string, object> Find(string name)
        {
            return Vectors().First(v => (string)v["name"] == name);
        }

        internal static byte[] Hex(string h)
        {
            var b = new byte[h.Length / 2];
            for (int i = 0; i < b.Length; i++) b[i] = Convert.ToByte(h.Substring(2 * i, 2), 16);
            return b;
        }

        internal static string ToHex(byte[] b)
        {
            return string.Concat(b.Select(x => x.ToString("x2")));
        }

        static Frame FromJson(Dictionary<string, object> j)
        {
            var f = new Frame();
            foreach (var kv in j)
            {
                var v = kv.Value;
                switch (kv.Key)
                {
                    case "type": f.Type = (byte)((string)v)[0]; break;
                    case "id": f.Id = (uint)(decimal)v; break;
                    case "owner": f.Owner = Hex((string)v); break;
                    case "cluster_id": f.ClusterId = Hex((string)v); break;
                    case "wait": f.Wait = (byte)(decimal)v; break;
                    case "lease": f.Lease = (byte)(decimal)v; break;
                    case "key": break; // key_hex is authoritative
                    case "key_hex": f.Key = Hex((string)v); break;
                    case "token": f.Token = ulong.Parse((string)v); break;
                    case "version": f.Version = (ushort)(decimal)v; break;
                    case "flags": f.Flags = (byte)(decimal)v; break;
                    case "text": break;
                    case "text_hex": f.Text = Hex((string)v); break;
                    case "interval_ms": f.IntervalMs = (uint)(decimal)v; break;
                    case "idle_interval_ms": f.IdleIntervalMs = (uint)(decimal)v; break;
                    case "count": f.Count = (uint)(decimal)v; break;
                    case "lease_ms": f.LeaseMs = (uint)(decimal)v; break;
                    case "queued_ms": f.QueuedMs = (uint)(decimal)v; break;
                    case "reason": f.Reason = (byte)(decimal)v; break;
                    case "code": f.Code = (ushort)(decimal)v; break;
                    case "remaining_ms": f.RemainingMs = (uint)(decimal)v; break;
                    case "nonce": f.Nonce = ulong.Parse((string)v); break;
                    case "op": f.Op = (byte)(decimal)v; break;
                    case "status": f.Code = (ushort)(decimal)v; break;
                    case "body": break; // body_hex is authoritative
                    case "body_hex": f.Body = Hex((string)v); break;
                    default: throw new InvalidDataException("vector field " + kv.Key + " is unknown to the C# test");
                }
            }
            return f;
        }

        /// <summary>Compares every field the JSON frame names.</summary>
        static void AssertFrame(string name, Dictionary<string, object> j, Frame want, Frame got)
        {
            Assert.AreEqual((char)want.Type, (char)got.Type, name + ": type");
            foreach (var k in j.Keys)
            {
                switch (k)
                {
                    case "id": Assert.AreEqual(want.Id, got.Id, name + ": id"); break;
                    case "owner": Assert.AreEqual(ToHex(want.Owner), ToHex(got.Owner), name + ": owner"); break;
                    case "cluster_id": Assert.AreEqual(ToHex(want.ClusterId), ToHex(got.ClusterId), name + ": cluster_id"); break;
                    case "wait": Assert.AreEqual(want.Wait, got.Wait, name + ": wait"); break;
                    case "lease": Assert.AreEqual(want.Lease, got.Lease, name + ": lease"); break;
                    case "key_hex": Assert.AreEqual(ToHex(want.Key), ToHex(got.Key), name + ": key"); break;
                    case "key": Assert.AreEqual((string)j["key"], new System.Text.UTF8Encoding(false).GetString(got.Key), name + ": key as text"); break;
                    case "token": Assert.AreEqual(want.Token, got.Token, name + ": token"); break;
                    case "version": Assert.AreEqual(want.Version, got.Version, name + ": version"); break;
                    case "flags": Assert.AreEqual(want.Flags, got.Flags, name + ": flags"); break;
                    case "text_hex": Assert.AreEqual(ToHex(want.Text), ToHex(got.Text), name + ": text"); break;
                    case "interval_ms": Assert.AreEqual(want.IntervalMs, got.IntervalMs, name + ": interval_ms"); break;
                    case "idle_interval_ms": Assert.AreEqual(want.IdleIntervalMs, got.IdleIntervalMs, name + ": idle_interval_ms"); break;
                    case "count": Assert.AreEqual(want.Count, got.Count, name + ": count"); break;
                    case "lease_ms": Assert.AreEqual(want.LeaseMs, got.LeaseMs, name + ": lease_ms"); break;
                    case "queued_ms": Assert.AreEqual(want.QueuedMs, got.QueuedMs, name + ": queued_ms"); break;
                    case "reason": Assert.AreEqual(want.Reason, got.Reason, name + ": reason"); break;
                    case "code": Assert.AreEqual(want.Code, got.Code, name + ": code"); break;
                    case "remaining_ms": Assert.AreEqual(want.RemainingMs, got.RemainingMs, name + ": remaining_ms"); break;
                    case "nonce": Assert.AreEqual(want.Nonce, got.Nonce, name + ": nonce"); break;
                    case "op": Assert.AreEqual(want.Op, got.Op, name + ": op"); break;
                    case "status": Assert.AreEqual(want.Code, got.Code, name + ": status"); break;
                    case "body_hex": Assert.AreEqual(ToHex(want.Body), ToHex(got.Body), name + ": body"); break;
                }
            }
        }

        [Test, TestCaseSource("VectorNames")]
        public void Vector(string name)
        {
            var v = Find(name);
            var bytes = Hex((string)v["hex"]);
            bool valid = (bool)v["valid"];
            if (valid || (string)v["stage"] == "validate")
            {
                var j = (Dictionary<string, object>)v["frame"];
                var want = FromJson(j);
                var got = Codec.Decode(bytes);
                AssertFrame(name, j, want, got);
                Assert.AreEqual((string)v["hex"], ToHex(Codec.Encode(want)), name + ": encoding");
                // The stream reader gets the same frame and stops at its end.
                var ms = new MemoryStream(bytes.Concat(new byte[] { 1, 2, 3 }).ToArray());
                AssertFrame(name, j, want, Codec.ReadFrame(ms, new byte[4]));
                Assert.AreEqual(bytes.Length, ms.Position, name + ": the reader read past the frame");
                // A coordination answer's body decodes by its sub-op's layout.
                if (got.Type == FrameType.CoordReply) Assert.DoesNotThrow(() => CoordCodec.Reply(got.Op, got.Code, got.Body), name + ": body");
                var why = Codec.Validate(got);
                if (valid) Assert.IsNull(why, name + ": a valid frame was refused by the range checks");
                else
                {
                    Assert.IsNotNull(why, name + ": the range checks accepted it");
                    Assert.AreEqual((ushort)ErrorCode.InvalidArgument, (ushort)(decimal)v["error_code"], name + ": a validate vector with a code other than 8");
                }
                return;
            }
            Assert.AreEqual("decode", (string)v["stage"], name);
            ushort code = (ushort)(decimal)v["error_code"];
            var e = Assert.Throws<WireException>(() => Codec.Decode(bytes), name);
            Assert.AreEqual(code, e.Code, name + ": " + e.Message);
            var s = new MemoryStream(bytes);
            var e2 = Assert.Throws<WireException>(() => Codec.ReadFrame(s, new byte[4]), name + " (stream)");
            Assert.AreEqual(code, e2.Code, name + " (stream): " + e2.Message);
            if (code == (ushort)ErrorCode.FrameTooLarge)
                Assert.AreEqual(4, s.Position, name + ": an oversized frame's payload must not be read");
        }

        [Test]
        public void EveryFrameTypeHasAValidVector()
        {
            var seen = new HashSet<char>(Vectors().Where(v => (bool)v["valid"])
                .Select(v => ((string)((Dictionary<string, object>)v["frame"])["type"])[0]));
            foreach (char t in "HACLUDJYGWQXBRNMEIVFPOKT")
                Assert.IsTrue(seen.Contains(t), "no valid vector of type " + t);
            Assert.GreaterOrEqual(Vectors().Count, 60);
        }

        static void PatchLength(byte[] b)
        {
            uint n = (uint)(b.Length - 4);
            b[0] = (byte)(n >> 24); b[1] = (byte)(n >> 16); b[2] = (byte)(n >> 8); b[3] = (byte)n;
        }

        [Test]
        public void OneByteShorterOrLongerIsMalformed()
        {
            // Every fixed-size valid frame, cut by one byte or with one extra, is refused with code 1.
            foreach (var v in Vectors().Where(v => (bool)v["valid"]))
            {
                var b = Hex((string)v["hex"]);
                var f = Codec.Decode(b);
                if (f.Type == FrameType.Admin || f.Type == FrameType.AdminReply) continue; // JSON runs to the end
                if (f.Type == FrameType.Coord) continue; // the body runs to the end; its layout is the server's check
                var shorter = b.Take(b.Length - 1).ToArray();
                PatchLength(shorter);
                var longer = b.Concat(new byte[] { 0 }).ToArray();
                PatchLength(longer);
                if (f.Type == FrameType.CoordReply)
                {
                    // The frame holds any body; the body's decoder refuses it.
                    foreach (var x in new[] { shorter, longer })
                    {
                        var e = Assert.Throws<WireException>(() => { var g = Codec.Decode(x); CoordCodec.Reply(g.Op, g.Code, g.Body); }, (string)v["name"]);
                        Assert.AreEqual((ushort)ErrorCode.MalformedFrame, e.Code, (string)v["name"]);
                    }
                    continue;
                }
                Assert.AreEqual((ushort)ErrorCode.MalformedFrame, Assert.Throws<WireException>(() => Codec.Decode(shorter)).Code, (string)v["name"] + " shorter");
                Assert.AreEqual((ushort)ErrorCode.MalformedFrame, Assert.Throws<WireException>(() => Codec.Decode(longer)).Code, (string)v["name"] + " longer");
            }
        }
    }
}
