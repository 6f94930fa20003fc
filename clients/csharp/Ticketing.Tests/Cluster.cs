using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Net;
using System.Net.Sockets;
using System.Text;
using System.Threading;
using NUnit.Framework;
using Ticketing.Wire;

namespace Ticketing.Tests
{
    /// <summary>
    /// Real ticketd processes on loopback with free ports and fresh data
    /// directories (fsync on, as always). The binary comes from TICKETD_BIN,
    /// which clients/csharp/test.sh builds from this repository.
    /// </summary>
    internal sealed class Cluster : IDisposable
    {
        readonly List<Process> procs = new List<Process>();
        readonly List<StringBuilder> logs = new List<StringBuilder>();
        readonly string dir;
        public readonly string[] Addrs;
        readonly string[] raft;
        readonly string[][] args;

        public static string Binary()
        {
            var bin = Environment.GetEnvironmentVariable("TICKETD_BIN");
            if (string.IsNullOrEmpty(bin) || !File.Exists(bin))
                Assert.Fail("TICKETD_BIN must name a ticketd binary built from this repository (clients/csharp/test.sh does: go build -o DIR/ticketd ./server/cmd/ticketd); it is \"" + bin + "\"");
            return bin;
        }

        // Every port FreePort has handed out in this process: two servers of
        // one cluster given the same port never form it.
        static readonly HashSet<int> HandedOut = new HashSet<int>();
        static readonly Random Pick = new Random();

        // FreePort returns a port that was free a moment ago, never handed out
        // before in this process, and below the kernel's ephemeral range
        // (32768 and up on Linux): a port 0 listener gets an ephemeral port,
        // which any outgoing connection may take the moment it is free.
        static int FreePort()
        {
            for (int i = 0; i < 1000; i++)
            {
                int p;
                lock (HandedOut)
                {
                    p = Pick.Next(10000, 32768);
                    if (HandedOut.Contains(p)) continue;
                }
                try
                {
                    var l = new TcpListener(IPAddress.Loopback, p);
                    l.Start();
                    l.Stop();
                }
                catch (SocketException)
                {
                    continue; // in use
                }
                lock (HandedOut)
                {
                    if (HandedOut.Add(p)) return p;
                }
            }
            throw new InvalidOperationException("no free port below 32768 in 1000 tries that was not handed out before");
        }

        public Cluster(int n, params string[] extra)
        {
            dir = Path.Combine(Path.GetTempPath(), "ticketing-cs-" + Guid.NewGuid().ToString("N").Substring(0, 8));
            Directory.CreateDirectory(dir);
            Addrs = new string[n];
            raft = new string[n];
            for (int i = 0; i < n; i++)
            {
                Addrs[i] = "127.0.0.1:" + FreePort();
                raft[i] = "127.0.0.1:" + FreePort();
            }
            var boot = string.Join(",", Enumerable.Range(0, n).Select(i => "n" + (i + 1) + "=" + raft[i]));
            // The servers prove a cluster secret to each other, made by ticketd's own generator.
            var secret = Path.Combine(dir, "raft-secret");
            NewRaftSecret(secret);
            args = new string[n][];
            for (int i = 0; i < n; i++)
            {
                var a = new List<string> { "--node-id", "n" + (i + 1), "--listen", Addrs[i], "--raft-listen", raft[i],
                    "--http-listen", "", "--data-dir", Path.Combine(dir, "n" + (i + 1)), "--bootstrap", boot,
                    "--raft-secret-file", secret, "--log-level", "warn" };
                a.AddRange(extra);
                args[i] = a.ToArray();
                procs.Add(null);
                logs.Add(new StringBuilder());
                Start(i);
            }
        }

        public string AddrList { get { return string.Join(",", Addrs); } }

        /// Writes a fresh cluster secret to file with "ticketd new-raft-secret", as docs/deployment.md says.
        static void NewRaftSecret(string file)
        {
            var psi = new ProcessStartInfo(Binary())
            {
                UseShellExecute = false,
                RedirectStandardOutput = true,
                RedirectStandardError = true,
                Arguments = "new-raft-secret " + Quote(file),
            };
            using (var p = Process.Start(psi))
            {
                var output = p.StandardOutput.ReadToEnd() + p.StandardError.ReadToEnd();
                p.WaitForExit();
                if (p.ExitCode != 0) throw new InvalidOperationException("ticketd new-raft-secret failed: " + output);
            }
        }

        void Start(int i)
        {
            var psi = new ProcessStartInfo(Binary())
            {
                UseShellExecute = false,
                RedirectStandardOutput = true,
                RedirectStandardError = true,
                Arguments = string.Join(" ", args[i].Select(Quote)),
            };
            var p = new Process { StartInfo = psi };
            var log = logs[i];
            DataReceivedEventHandler h = (s, e) => { if (e.Data != null) lock (log) log.AppendLine(e.Data); };
            p.OutputDataReceived += h;
            p.ErrorDataReceived += h;
            p.Start();
            p.BeginOutputReadLine();
            p.BeginErrorReadLine();
            procs[i] = p;
        }

        static string Quote(string a) { return "\"" + a.Replace("\\", "\\\\").Replace("\"", "\\\"") + "\""; }

        public string Logs()
        {
            var sb = new StringBuilder();
            for (int i = 0; i < logs.Count; i++) lock (logs[i]) sb.Append("--- n" + (i + 1) + "\n" + logs[i]);
            return sb.ToString();
        }

        public void Kill(int i)
        {
            var p = procs[i];
            if (p == null) return;
            try { p.Kill(); } catch (Exception) { }
            p.WaitForExit(U.Patience);
            procs[i] = null;
        }

        /// <summary>
        /// Stops node i as an operator does for a planned restart (SIGTERM),
        /// waits for it to exit and returns its exit code.
        /// </summary>
        public int Stop(int i)
        {
            var p = procs[i];
            using (var kill = Process.Start(new ProcessStartInfo("kill", "-TERM " + p.Id) { UseShellExecute = false }))
                kill.WaitForExit();
            if (!p.WaitForExit(U.Patience)) Assert.Fail("n" + (i + 1) + " did not exit within " + U.Patience + " ms of SIGTERM\n" + Logs());
            procs[i] = null;
            return p.ExitCode;
        }

        /// <summary>Starts node i again (after Stop or Kill), on its data directory and addresses.</summary>
        public void Restart(int i) { Start(i); }

        /// <summary>The index of the node that answers a hello as the leader, waiting until one does.</summary>
        public int LeaderIndex()
        {
            int found = -1;
            U.WaitUntil("a leader answers a hello", () =>
            {
                for (int i = 0; i < Addrs.Length; i++)
                {
                    if (procs[i] == null) continue;
                    if (IsLeader(Addrs[i])) { found = i; return true; }
                }
                return false;
            });
            return found;
        }

        static bool IsLeader(string addr)
        {
            try
            {
                using (var c = new TcpClient())
                {
                    string host; int port;
                    Connection.SplitAddr(addr, out host, out port);
                    c.Connect(host, port);
                    c.ReceiveTimeout = 2000;
                    var s = c.GetStream();
                    var h = Codec.Encode(new Frame { Type = FrameType.Hello, Version = 1 });
                    s.Write(h, 0, h.Length);
                    var f = Codec.ReadFrame(s, new byte[4]);
                    return f != null && f.Type == FrameType.Ready && (f.Flags & Codec.ReadyLeader) != 0;
                }
            }
            catch (Exception) { return false; }
        }

        /// <summary>The cluster's ID as a running node reports it in its hello answer, waiting until one has it.</summary>
        public string ClusterId()
        {
            string id = null;
            U.WaitUntil("a node reports its cluster ID", () =>
            {
                for (int i = 0; i < Addrs.Length; i++)
                {
                    if (procs[i] == null) continue;
                    try
                    {
                        using (var c = new TcpClient())
                        {
                            string host; int port;
                            Connection.SplitAddr(Addrs[i], out host, out port);
                            c.Connect(host, port);
                            c.ReceiveTimeout = 2000;
                            var s = c.GetStream();
                            var h = Codec.Encode(new Frame { Type = FrameType.Hello, Version = 1, Flags = Codec.HelloAdmin | Codec.HelloClusterId });
                            s.Write(h, 0, h.Length);
                            var f = Codec.ReadFrame(s, new byte[4]);
                            if (f != null && f.Type == FrameType.Ready && (f.Flags & Codec.ReadyClusterId) != 0 && ClusterPin.Format(f.ClusterId) != "none")
                            {
                                id = ClusterPin.Format(f.ClusterId);
                                return true;
                            }
                        }
                    }
                    catch (Exception) { }
                }
                return false;
            });
            return id;
        }

        public void Dispose()
        {
            for (int i = 0; i < procs.Count; i++) Kill(i);
            try { Directory.Delete(dir, true); } catch (Exception) { }
        }
    }
}
