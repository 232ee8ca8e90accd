from nvidia_oci_hook.cli import run

run()
