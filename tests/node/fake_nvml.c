/*
 * A stand-in for libnvidia-ml.so.1: just the entry points nvidia_oci_hook.node.nvml reaches through pynvml.
 *
 * Configured from the environment at every nvmlInit*, because one process loads this file once (the dynamic
 * loader hands the same copy to every later dlopen of the path) while each test wants another node:
 *   FAKE_NVML_DRIVER            driver version string (default 550.54.15)
 *   FAKE_NVML_GPUS              minor:uuid[:name],... one GPU each, in index order
 *   FAKE_NVML_MIG               indexes whose MIG mode is enabled (current and pending)
 *   FAKE_NVML_MIG_PENDING       indexes whose MIG mode is disabled now and enabled after a reset
 *   FAKE_NVML_MIG_UNSUPPORTED   indexes that answer NVML_ERROR_NOT_SUPPORTED for the MIG mode
 *   FAKE_NVML_LOST              indexes whose per-device queries answer NVML_ERROR_GPU_IS_LOST
 *   FAKE_NVML_FAIL_INIT         non-empty and not 0: init answers NVML_ERROR_DRIVER_NOT_LOADED, after the nodes
 *   FAKE_NVML_CREATE_NODES_IN   a directory: init mknods nvidiactl (c 195:255) and nvidiaN (c 195:N) there for
 *                               every GPU whose node is missing, as the real library does with ModifyDeviceFiles=1
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>

typedef int nvmlReturn_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NO_PERMISSION 4
#define NVML_ERROR_ALREADY_INITIALIZED 5
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_UNKNOWN 999

#define MAX_GPUS 64
#define FIELD 96

struct fake_device {
    unsigned int index;
    unsigned int minor;
    char uuid[FIELD];
    char name[FIELD];
    unsigned int mig_current;
    unsigned int mig_pending;
    int mig_unsupported;
    int lost;
};
typedef struct fake_device *nvmlDevice_t;

static struct fake_device devices[MAX_GPUS];
static unsigned int device_count;
static char driver_version[FIELD];
static unsigned int init_count;

static int listed(const char *variable, unsigned int index) {
    const char *value = getenv(variable);
    char *end;
    if (value == NULL)
        return 0;
    while (*value != '\0') {
        unsigned long number = strtoul(value, &end, 10);
        if (end != value && number == index && (*end == ',' || *end == '\0'))
            return 1;
        value = strchr(value, ',');
        if (value == NULL)
            break;
        value++;
    }
    return 0;
}

static void copy_field(char *target, const char *start, size_t length) {
    if (length >= FIELD)
        length = FIELD - 1;
    memcpy(target, start, length);
    target[length] = '\0';
}

static void load_configuration(void) {
    const char *value = getenv("FAKE_NVML_DRIVER");
    copy_field(driver_version, value ? value : "550.54.15", strlen(value ? value : "550.54.15"));

    device_count = 0;
    value = getenv("FAKE_NVML_GPUS");
    while (value != NULL && *value != '\0' && device_count < MAX_GPUS) {
        const char *entry_end = strchr(value, ',');
        size_t entry_length = entry_end ? (size_t)(entry_end - value) : strlen(value);
        char entry[3 * FIELD];
        char *uuid, *name;
        struct fake_device *device = &devices[device_count];

        copy_field(entry, value, entry_length < sizeof(entry) ? entry_length : sizeof(entry) - 1);
        memset(device, 0, sizeof(*device));
        device->index = device_count;
        device->minor = (unsigned int)strtoul(entry, &uuid, 10);
        if (*uuid == ':')
            uuid++;
        name = strchr(uuid, ':');
        if (name != NULL)
            *name++ = '\0';
        copy_field(device->uuid, uuid, strlen(uuid));
        copy_field(device->name, name ? name : "NVIDIA Fake GPU", strlen(name ? name : "NVIDIA Fake GPU"));
        device->mig_current = listed("FAKE_NVML_MIG", device_count) ? 1 : 0;
        device->mig_pending = device->mig_current || listed("FAKE_NVML_MIG_PENDING", device_count) ? 1 : 0;
        device->mig_unsupported = listed("FAKE_NVML_MIG_UNSUPPORTED", device_count);
        device->lost = listed("FAKE_NVML_LOST", device_count);
        device_count++;
        value = entry_end ? entry_end + 1 : NULL;
    }
}

static void create_node(const char *directory, const char *name, unsigned int minor) {
    char path[4096];
    struct stat info;
    snprintf(path, sizeof(path), "%s/%s", directory, name);
    if (lstat(path, &info) == 0)
        return;
    if (mknod(path, S_IFCHR | 0666, makedev(195, minor)) != 0)
        fprintf(stderr, "fake NVML: mknod %s: %s\n", path, strerror(errno));
}

static void create_nodes(void) {
    const char *directory = getenv("FAKE_NVML_CREATE_NODES_IN");
    char name[32];
    unsigned int i;
    if (directory == NULL || *directory == '\0')
        return;
    create_node(directory, "nvidiactl", 255);
    for (i = 0; i < device_count; i++) {
        snprintf(name, sizeof(name), "nvidia%u", devices[i].minor);
        create_node(directory, name, devices[i].minor);
    }
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    const char *fail = getenv("FAKE_NVML_FAIL_INIT");
    (void)flags;
    load_configuration();
    create_nodes();
    if (fail != NULL && *fail != '\0' && strcmp(fail, "0") != 0)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    init_count++;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    init_count--;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
        return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED:
        return "Already Initialized";
    case NVML_ERROR_NOT_FOUND:
        return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST:
        return "GPU is lost";
    default:
        return "Unknown Error";
    }
}

static nvmlReturn_t copy_out(const char *value, char *buffer, unsigned int length) {
    if (buffer == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(value) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buffer, value, strlen(value) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    return copy_out(driver_version, version, length);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (count == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = device_count;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || index >= device_count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

/* A handle is good only if it points at one of the GPUs this init configured. */
static nvmlReturn_t check_handle(nvmlDevice_t device) {
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || device < devices || device >= devices + device_count)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (device->lost)
        return NVML_ERROR_GPU_IS_LOST;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor) {
    nvmlReturn_t result = check_handle(device);
    if (result != NVML_SUCCESS)
        return result;
    if (minor == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *minor = device->minor;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    nvmlReturn_t result = check_handle(device);
    if (result != NVML_SUCCESS)
        return result;
    return copy_out(device->uuid, uuid, length);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    nvmlReturn_t result = check_handle(device);
    if (result != NVML_SUCCESS)
        return result;
    return copy_out(device->name, name, length);
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending) {
    nvmlReturn_t result = check_handle(device);
    if (result != NVML_SUCCESS)
        return result;
    if (current == NULL || pending == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (device->mig_unsupported)
        return NVML_ERROR_NOT_SUPPORTED;
    *current = device->mig_current;
    *pending = device->mig_pending;
    return NVML_SUCCESS;
}
