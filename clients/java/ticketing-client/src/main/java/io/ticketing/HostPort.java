package io.ticketing;

import java.util.ArrayList;
import java.util.List;

/** A parsed "host:port" address (IPv6 hosts in brackets). */
record HostPort(String host, int port) {
    static HostPort parse(String addr) {
        String a = addr.trim();
        int i = a.lastIndexOf(':');
        if (i <= 0 || i == a.length() - 1) {
            throw new InvalidArgumentException("address \"" + addr + "\" is not host:port");
        }
        String host = a.substring(0, i);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        } else if (host.contains(":")) {
            throw new InvalidArgumentException("address \"" + addr + "\" is not host:port (put an IPv6 host in brackets)");
        }
        int port;
        try {
            port = Integer.parseInt(a.substring(i + 1));
        } catch (NumberFormatException e) {
            throw new InvalidArgumentException("address \"" + addr + "\" has no numeric port");
        }
        if (port < 1 || port > 65535) {
            throw new InvalidArgumentException("address \"" + addr + "\" has a port outside 1..65535");
        }
        return new HostPort(host, port);
    }

    /** Splits "a:1,b:2" (and every element of the array) into checked addresses. */
    static List<String> parseList(String... addrs) {
        List<String> out = new ArrayList<>();
        for (String s : addrs) {
            if (s == null) {
                continue;
            }
            for (String p : s.split(",")) {
                if (!p.isBlank()) {
                    parse(p);
                    out.add(p.trim());
                }
            }
        }
        if (out.isEmpty()) {
            throw new InvalidArgumentException("no server address given; pass host:port (e.g. \"127.0.0.1:5225\")");
        }
        return out;
    }
}
