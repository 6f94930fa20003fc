package io.ticketing.spring.boot;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.springframework.boot.context.properties.ConfigurationProperties;

/** {@code ticketing.*}: where the cluster is and how to talk to it. */
@ConfigurationProperties("ticketing")
public class TicketingProperties {
    /** The defaults: no addresses, no token, TLS off. */
    public TicketingProperties() {}

    /** Server addresses, host:port (a list, or one comma-separated string). */
    private List<String> addrs = new ArrayList<>();
    /** The client token (must match one of the servers' client_tokens); empty for none. */
    private String token = "";
    /** How long a call waits for a connection to the leader before giving up with nothing sent. */
    private Duration connectWait = Duration.ofSeconds(10);
    /**
     * The cluster the client serves (32 hex digits, the cluster_id of ticketctl status); empty: the cluster of the
     * first server reached. A server of another cluster is refused. After a restore from a snapshot, set the
     * restored cluster's new ID (or restart the application).
     */
    private String clusterId = "";
    /** TLS settings. */
    private final Tls tls = new Tls();
    /** The ShedLock provider's settings. */
    private final Shedlock shedlock = new Shedlock();
    /** The Spring Integration lock registry's settings. */
    private final LockRegistry lockRegistry = new LockRegistry();

    /**
     * The cluster the client is pinned to.
     *
     * @return its ID, or empty for the cluster of the first server reached
     */
    public String getClusterId() {
        return clusterId;
    }

    /**
     * Pins the client to a cluster.
     *
     * @param clusterId its ID (32 hex digits), or empty
     */
    public void setClusterId(String clusterId) {
        this.clusterId = clusterId;
    }

    /** {@code ticketing.tls.*}. */
    public static class Tls {
        /** TLS off, no files. */
        public Tls() {}

        /** off, system-roots, ca (with ca), insecure-skip-verify (tests only). */
        private String mode = "off";
        /** CA file (PEM) for mode ca. */
        private String ca;
        /** Client certificate (PEM) for servers that require one (mutual TLS). */
        private String cert;
        /** Its private key (PKCS#8 PEM). */
        private String key;

        /**
         * The TLS mode.
         *
         * @return off, system-roots, ca or insecure-skip-verify
         */
        public String getMode() {
            return mode;
        }

        /**
         * Sets the TLS mode.
         *
         * @param mode off, system-roots, ca or insecure-skip-verify
         */
        public void setMode(String mode) {
            this.mode = mode;
        }

        /**
         * The CA file.
         *
         * @return its path, or null
         */
        public String getCa() {
            return ca;
        }

        /**
         * Sets the CA file.
         *
         * @param ca its path
         */
        public void setCa(String ca) {
            this.ca = ca;
        }

        /**
         * The client certificate.
         *
         * @return its path, or null
         */
        public String getCert() {
            return cert;
        }

        /**
         * Sets the client certificate.
         *
         * @param cert its path
         */
        public void setCert(String cert) {
            this.cert = cert;
        }

        /**
         * The client certificate's key.
         *
         * @return its path, or null
         */
        public String getKey() {
            return key;
        }

        /**
         * Sets the client certificate's key.
         *
         * @param key its path
         */
        public void setKey(String key) {
            this.key = key;
        }
    }

    /**
     * The server addresses.
     *
     * @return host:port addresses
     */
    public List<String> getAddrs() {
        return addrs;
    }

    /**
     * Sets the server addresses.
     *
     * @param addrs host:port addresses
     */
    public void setAddrs(List<String> addrs) {
        this.addrs = addrs;
    }

    /**
     * The client token.
     *
     * @return the token, or null
     */
    public String getToken() {
        return token;
    }

    /**
     * Sets the client token.
     *
     * @param token the token
     */
    public void setToken(String token) {
        this.token = token;
    }

    /**
     * The connect wait.
     *
     * @return the wait
     */
    public Duration getConnectWait() {
        return connectWait;
    }

    /**
     * Sets the connect wait.
     *
     * @param connectWait the wait
     */
    public void setConnectWait(Duration connectWait) {
        this.connectWait = connectWait;
    }

    /**
     * The TLS settings.
     *
     * @return the settings
     */
    public Tls getTls() {
        return tls;
    }

    /**
     * The ShedLock provider's settings.
     *
     * @return the settings
     */
    public Shedlock getShedlock() {
        return shedlock;
    }

    /**
     * The Spring Integration lock registry's settings.
     *
     * @return the settings
     */
    public LockRegistry getLockRegistry() {
        return lockRegistry;
    }

    /** {@code ticketing.shedlock.*}: the ShedLock provider (module ticketing-shedlock). */
    public static class Shedlock {
        /** The defaults. */
        public Shedlock() {}

        /** Whether to configure the ShedLock provider when its module is on the class path. */
        private boolean enabled = true;
        /** The coordination node of its semaphores (created when missing). */
        private String node = "/shedlock";
        /** The prefix of its ticket keys and semaphore names. */
        private String prefix = "shedlock/";
        /** Its coordination session's timeout: how long its holds outlive a dead process. */
        private Duration sessionTimeout = Duration.ofSeconds(10);

        /**
         * Whether it is configured.
         *
         * @return true unless switched off
         */
        public boolean isEnabled() {
            return enabled;
        }

        /**
         * Switches it on or off.
         *
         * @param enabled whether to configure it
         */
        public void setEnabled(boolean enabled) {
            this.enabled = enabled;
        }

        /**
         * The coordination node.
         *
         * @return its path
         */
        public String getNode() {
            return node;
        }

        /**
         * Sets the coordination node.
         *
         * @param node its path
         */
        public void setNode(String node) {
            this.node = node;
        }

        /**
         * The prefix of keys and names.
         *
         * @return the prefix
         */
        public String getPrefix() {
            return prefix;
        }

        /**
         * Sets the prefix of keys and names.
         *
         * @param prefix the prefix
         */
        public void setPrefix(String prefix) {
            this.prefix = prefix;
        }

        /**
         * The session's timeout.
         *
         * @return the timeout
         */
        public Duration getSessionTimeout() {
            return sessionTimeout;
        }

        /**
         * Sets the session's timeout.
         *
         * @param sessionTimeout the timeout
         */
        public void setSessionTimeout(Duration sessionTimeout) {
            this.sessionTimeout = sessionTimeout;
        }
    }

    /** {@code ticketing.lock-registry.*}: the Spring Integration lock registry (module ticketing-spring-integration). */
    public static class LockRegistry {
        /** The defaults. */
        public LockRegistry() {}

        /** Whether to configure the lock registry when its module is on the class path. */
        private boolean enabled = true;
        /** The coordination node of its semaphores (created when missing). */
        private String node = "/spring-integration";
        /** The prefix of its ticket keys and semaphore names. */
        private String prefix = "lock/";
        /** Its coordination session's timeout: how long its holds outlive a dead process. */
        private Duration sessionTimeout = Duration.ofSeconds(10);

        /**
         * Whether it is configured.
         *
         * @return true unless switched off
         */
        public boolean isEnabled() {
            return enabled;
        }

        /**
         * Switches it on or off.
         *
         * @param enabled whether to configure it
         */
        public void setEnabled(boolean enabled) {
            this.enabled = enabled;
        }

        /**
         * The coordination node.
         *
         * @return its path
         */
        public String getNode() {
            return node;
        }

        /**
         * Sets the coordination node.
         *
         * @param node its path
         */
        public void setNode(String node) {
            this.node = node;
        }

        /**
         * The prefix of keys and names.
         *
         * @return the prefix
         */
        public String getPrefix() {
            return prefix;
        }

        /**
         * Sets the prefix of keys and names.
         *
         * @param prefix the prefix
         */
        public void setPrefix(String prefix) {
            this.prefix = prefix;
        }

        /**
         * The session's timeout.
         *
         * @return the timeout
         */
        public Duration getSessionTimeout() {
            return sessionTimeout;
        }

        /**
         * Sets the session's timeout.
         *
         * @param sessionTimeout the timeout
         */
        public void setSessionTimeout(Duration sessionTimeout) {
            this.sessionTimeout = sessionTimeout;
        }
    }
}
