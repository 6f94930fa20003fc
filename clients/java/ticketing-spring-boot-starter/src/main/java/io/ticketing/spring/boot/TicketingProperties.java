package io.ticketing.spring.boot;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.springframework.boot.context.properties.ConfigurationProperties;

/** {@code ticketing.*}: where the cluster is and how to talk to it. */
@ConfigurationProperties("ticketing")
public class TicketingProperties {
    /** Server addresses, host:port (a list, or one comma-separated string). */
    private List<String> addrs = new ArrayList<>();
    /** The client token (must match one of the servers' client_tokens); empty for none. */
    private String token = "";
    /** How long a call waits for a connection to the leader before giving up with nothing sent. */
    private Duration connectWait = Duration.ofSeconds(10);
    /** TLS settings. */
    private final Tls tls = new Tls();

    /** {@code ticketing.tls.*}. */
    public static class Tls {
        /** off, system-roots, ca (with ca), insecure-skip-verify (tests only). */
        private String mode = "off";
        /** CA file (PEM) for mode ca. */
        private String ca;
        /** Client certificate (PEM) for servers that require one (mutual TLS). */
        private String cert;
        /** Its private key (PKCS#8 PEM). */
        private String key;

        public String getMode() {
            return mode;
        }

        public void setMode(String mode) {
            this.mode = mode;
        }

        public String getCa() {
            return ca;
        }

        public void setCa(String ca) {
            this.ca = ca;
        }

        public String getCert() {
            return cert;
        }

        public void setCert(String cert) {
            this.cert = cert;
        }

        public String getKey() {
            return key;
        }

        public void setKey(String key) {
            this.key = key;
        }
    }

    public List<String> getAddrs() {
        return addrs;
    }

    public void setAddrs(List<String> addrs) {
        this.addrs = addrs;
    }

    public String getToken() {
        return token;
    }

    public void setToken(String token) {
        this.token = token;
    }

    public Duration getConnectWait() {
        return connectWait;
    }

    public void setConnectWait(Duration connectWait) {
        this.connectWait = connectWait;
    }

    public Tls getTls() {
        return tls;
    }
}
