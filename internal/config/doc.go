// Package config loads gridsub's site configuration: which sites exist (kind
// sim, slurm or pbs, nodes, cores, heterogeneity h, how to reach them over
// SSH), the network between them, the broker's settings, the simulator's,
// and the staging limits (staging.max_file_size, max_job_bytes, min_rate,
// min_time, fetch_workers, fetch_timeout: every transfer to and from a real
// site bounded in size and time; see Staging).
//
// Load reads a YAML file (a regular file of at most MaxFileSize bytes: a
// FIFO or a device is refused without being read) with viper (or, for path "", the built-in
// configs/testbed.yaml; a bare name such as "local-slurm" also finds a
// built-in file) and then, in this order:
//
//  1. applies GRIDSUB_* environment overrides to the scalar keys listed in
//     EnvKeys (broker.policy by GRIDSUB_BROKER_POLICY, sim.time_scale by
//     GRIDSUB_SIM_TIME_SCALE, ...). Only those keys: the local testbed's
//     environment also sets GRIDSUB_SITES and friends, which must not
//     replace the site list;
//  2. refuses every key that looks like a secret (password, passphrase,
//     token, ...) and every value holding an inline private key: use
//     ssh.key_file or ssh.agent instead;
//  3. refuses unknown keys, with the valid ones and a did-you-mean;
//  4. expands ${VAR} and ${VAR:-default} in string values ("$${" is a
//     literal "${"); an unset variable is an error naming it, the keys that
//     use it, and the testbed.env file that exports the local testbed's
//     variables;
//  5. converts every value to its type (durations as in job files, rates
//     such as "1MB/s" or "10Mbps", sizes such as "10GiB", numbers given as strings by ${VAR}),
//     fills defaults, and validates every value. Every number has a range
//     (the Min*/Max* constants of validate.go): beyond it a value would
//     overflow the int64-nanosecond arithmetic built on it or stall the
//     daemon's clock (an interval or "@every" of 1ns, a time_scale of
//     1e-300), so it is refused naming the key and the range.
//
// ssh.insecure_ignore_host_key: true lets through only a host that the
// known_hosts files (ssh.known_hosts, else ~/.ssh/known_hosts) do not
// list; a host they list must still offer a listed key, and a different
// or @revoked key is refused as with the flag off.
//
// ssh.ssh_config ("default", or an absolute OpenSSH client configuration
// file) resolves ssh.host as OpenSSH does (ssh -G): port, user, key_file,
// known_hosts, cert_file and proxy_jump may then come from it (the port is
// not defaulted to 22), and the fields given win. ssh.proxy_jump lists
// jump hosts "[user@]host[:port],..."; ssh.cert_file is an OpenSSH user
// certificate. See backends/transport's package documentation.
//
// broker.tls_cert and broker.tls_key (both or neither) make `gridsub serve
// --listen` speak TLS 1.2+; a --listen address that is not loopback is
// refused without them unless broker.insecure_plaintext is true.
//
// Every problem is reported (an Errors list of *Error, each wrapping one of
// the sentinels) with the key path, e.g. "sites[1].ssh.port", and what would
// be valid. All defaults live in the defaults, siteDefaults and sshDefaults
// tables of config.go.
//
// Config.Links, Config.PolicySites and Config.Snapshot convert the
// configuration into the policy package's Snapshot pieces; Config.SiteIndex
// maps a name to its index there.
//
// Config.Spec is what bridge/assemble builds a broker from. Each site is
// described once for the plugin catalog (Config.BackendSpec: a
// plugins.BackendConfig with every field a backend reads, the staging
// limits included, and the mode: in process, isolate, or the plugin
// section's executable), and the catalog builds it the same way in every
// mode. TestEverySiteFieldReachesTheBackend walks every field of Site, SSH,
// Plugin and Staging by reflection through every mode: a field added here
// fails it until the catalog passes it on.
package config
