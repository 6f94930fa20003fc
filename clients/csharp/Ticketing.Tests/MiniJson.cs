using System;
using System.Collections.Generic;
using System.Globalization;
using System.Text;

namespace Ticketing.Tests
{
    /// <summary>
    /// A small JSON reader for testdata/vectors.json: objects become
    /// Dictionary&lt;string, object&gt;, arrays List&lt;object&gt;, numbers
    /// decimal, strings string, true/false bool, null null. The tests run on
    /// Mono without NuGet packages, so no JSON library is assumed.
    /// </summary>
    internal sealed class MiniJson
    {
        readonly string s;
        int p;

        MiniJson(string s) { this.s = s; }

        public static object Parse(string s)
        {
            var j = new MiniJson(s);
            var v = j.Value();
            j.Ws();
            if (j.p != s.Length) throw j.Err("trailing characters");
            return v;
        }

        Exception Err(string why) { return new FormatException("JSON at offset " + p + ": " + why); }

        void Ws() { while (p < s.Length && char.IsWhiteSpace(s[p])) p++; }

        object Value()
        {
            Ws();
            if (p >= s.Length) throw Err("unexpected end");
            char c = s[p];
            if (c == '{') return Obj();
            if (c == '[') return Arr();
            if (c == '"') return Str();
            if (c == 't' && s.Substring(p).StartsWith("true")) { p += 4; return true; }
            if (c == 'f' && s.Substring(p).StartsWith("false")) { p += 5; return false; }
            if (c == 'n' && s.Substring(p).StartsWith("null")) { p += 4; return null; }
            return Num();
        }

        Dictionary<string, object> Obj()
        {
            var d = new Dictionary<string, object>();
            p++;
            Ws();
            if (s[p] == '}') { p++; return d; }
            for (;;)
            {
                Ws();
                var k = Str();
                Ws();
                if (s[p++] != ':') throw Err("':' expected");
                d[k] = Value();
                Ws();
                char c = s[p++];
                if (c == '}') return d;
                if (c != ',') throw Err("',' or '}' expected");
            }
        }

        List<object> Arr()
        {
            var l = new List<object>();
            p++;
            Ws();
            if (s[p] == ']') { p++; return l; }
            for (;;)
            {
                l.Add(Value());
                Ws();
                char c = s[p++];
                if (c == ']') return l;
                if (c != ',') throw Err("',' or ']' expected");
            }
        }

        string Str()
        {
            if (s[p] != '"') throw Err("string expected");
            p++;
            var sb = new StringBuilder();
            for (;;)
            {
                char c = s[p++];
                if (c == '"') return sb.ToString();
                if (c != '\\') { sb.Append(c); continue; }
                char e = s[p++];
                switch (e)
                {
                    case '"': sb.Append('"'); break;
                    case '\\': sb.Append('\\'); break;
                    case '/': sb.Append('/'); break;
                    case 'b': sb.Append('\b'); break;
                    case 'f': sb.Append('\f'); break;
                    case 'n': sb.Append('\n'); break;
                    case 'r': sb.Append('\r'); break;
                    case 't': sb.Append('\t'); break;
                    case 'u': sb.Append((char)int.Parse(s.Substring(p, 4), NumberStyles.HexNumber)); p += 4; break;
                    default: throw Err("bad escape");
                }
            }
        }

        decimal Num()
        {
            int st = p;
            while (p < s.Length && "+-0123456789.eE".IndexOf(s[p]) >= 0) p++;
            if (st == p) throw Err("value expected");
            return decimal.Parse(s.Substring(st, p - st), NumberStyles.Float, CultureInfo.InvariantCulture);
        }
    }
}
