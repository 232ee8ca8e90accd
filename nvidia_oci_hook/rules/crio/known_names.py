"""The names cri-o accepts: capabilities, ulimits, pod metrics, TLS versions and cipher suites, annotations."""

from __future__ import annotations

# Capabilities cri-o knows (moby/sys/capability, up to CAP_CHECKPOINT_RESTORE).
CAPABILITIES = frozenset(
    "CAP_" + name
    for name in [
        "CHOWN",
        "DAC_OVERRIDE",
        "DAC_READ_SEARCH",
        "FOWNER",
        "FSETID",
        "KILL",
        "SETGID",
        "SETUID",
        "SETPCAP",
        "LINUX_IMMUTABLE",
        "NET_BIND_SERVICE",
        "NET_BROADCAST",
        "NET_ADMIN",
        "NET_RAW",
        "IPC_LOCK",
        "IPC_OWNER",
        "SYS_MODULE",
        "SYS_RAWIO",
        "SYS_CHROOT",
        "SYS_PTRACE",
        "SYS_PACCT",
        "SYS_ADMIN",
        "SYS_BOOT",
        "SYS_NICE",
        "SYS_RESOURCE",
        "SYS_TIME",
        "SYS_TTY_CONFIG",
        "MKNOD",
        "LEASE",
        "AUDIT_WRITE",
        "AUDIT_CONTROL",
        "SETFCAP",
        "MAC_OVERRIDE",
        "MAC_ADMIN",
        "SYSLOG",
        "WAKE_ALARM",
        "BLOCK_SUSPEND",
        "AUDIT_READ",
        "PERFMON",
        "BPF",
        "CHECKPOINT_RESTORE",
    ]
)
ULIMITS = frozenset(
    [
        "core",
        "cpu",
        "data",
        "fsize",
        "locks",
        "memlock",
        "msgqueue",
        "nice",
        "nofile",
        "nproc",
        "rss",
        "rtprio",
        "rttime",
        "sigpending",
        "stack",
    ]
)
POD_METRICS = ("cpu", "disk", "diskIO", "hugetlb", "memory", "network", "oom", "process", "spec", "pressure")
TLS_VERSIONS = ("VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13")
# Go's crypto/tls CipherSuites() and InsecureCipherSuites() names, plus Kubernetes' two aliases.
TLS_CIPHERS = frozenset(
    [
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        "TLS_RSA_WITH_RC4_128_SHA",
        "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
        "TLS_RSA_WITH_AES_128_CBC_SHA",
        "TLS_RSA_WITH_AES_256_CBC_SHA",
        "TLS_RSA_WITH_AES_128_CBC_SHA256",
        "TLS_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_RSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
        "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
        "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    ]
)
# Annotations a runtime handler or workload may allow (pkg/annotations/v2 AllAllowedAnnotations).
_V2_ANNOTATIONS = [
    "cgroup2-mount-hierarchy-rw",
    "devices",
    "disable-fips",
    "link-logs",
    "platform-runtime-path",
    "pod-linux-overhead",
    "pod-linux-resources",
    "seccomp-notifier-action",
    "seccomp-profile",
    "shm-size",
    "spoofed",
    "try-skip-volume-selinux-label",
    "umask",
    "unified-cgroup",
    "userns-mode",
    "cpu-load-balancing",
    "cpu-quota",
    "cpu-c-states",
    "cpu-freq-governor",
    "cpu-shared",
    "irq-load-balancing",
]
ALLOWED_ANNOTATIONS = frozenset(
    [
        "io.kubernetes.cri.rdt-class",
        "bundle",
        "org.systemd.property.",
        "org.criu.config",
        "module.wasm.image/variant",
        "io.kubernetes.cri.container-type",
        "run.oci.",
        "io.containers.trace-syscall",
        "org.opencontainers.image.stopSignal",
        *(f"{name}.crio.io" for name in _V2_ANNOTATIONS if name != "skip-gomaxprocs"),
        *(
            f"io.kubernetes.cri-o.{name}"
            for name in [
                "userns-mode",
                "cgroup2-mount-hierarchy-rw",
                "UnifiedCgroup",
                "Spoofed",
                "ShmSize",
                "Devices",
                "TrySkipVolumeSELinuxLabel",
                "seccompNotifierAction",
                "umask",
                "PodLinuxOverhead",
                "PodLinuxResources",
                "LinkLogs",
                "PlatformRuntimePath",
                "DisableFIPS",
            ]
        ),
        "seccomp-profile.kubernetes.cri-o.io",
    ]
)
