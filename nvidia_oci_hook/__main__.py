from nvidia_oci_hook.entry import run

run()
