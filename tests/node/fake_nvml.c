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
 *   FAKE_NVML_CUDA              the CUDA driver version as NVML encodes it, 1000 * major + 10 * minor (default
 *                               12040), answered by nvmlSystemGetCudaDriverVersion_v2 and nvmlSystemGetCudaDriverVersion
 *   FAKE_NVML_CUDA_V1           what nvmlSystemGetCudaDriverVersion alone answers (default FAKE_NVML_CUDA)
 *   FAKE_NVML_NO_CUDA_VERSION   which of those answer NVML_ERROR_NOT_SUPPORTED: 1 (the first), 2 (_v2) or 1,2
 *   FAKE_NVML_NO_LIBCUDA        non-empty and not 0: _v2 answers NVML_ERROR_LIBRARY_NOT_FOUND, as NVML does on a
 *                               node without libcuda.so.1 (the first still answers)
 * Per-GPU values, each one "value" for every GPU, "index:value,..." per GPU, or both ("5,1:2": 2 for GPU 1, 5 for
 * the others); the value "unsupported" makes that GPU's query answer NVML_ERROR_NOT_SUPPORTED, "error"
 * NVML_ERROR_UNKNOWN:
 *   FAKE_NVML_BRAND             nvmlBrandType_t number (default 2, NVML_BRAND_TESLA)
 *   FAKE_NVML_ARCH              CUDA compute capability, major.minor (default 8.0)
 *   FAKE_NVML_MIG_MAX           nvmlDeviceGetMaxMigDeviceCount (default 7; FAKE_NVML_MIG_UNSUPPORTED GPUs: unsupported)
 *   FAKE_NVML_MIG_DEVICES       the MIG devices of a GPU whose MIG mode is on now, by MIG handle index, separated by
 *                               ';': uuid[@gi.ci] (ids by default: GPU instance = the index, compute instance 0); an
 *                               empty entry leaves its index without a device (NVML_ERROR_NOT_FOUND). Indexes from
 *                               the MIG maximum on answer NVML_ERROR_INVALID_ARGUMENT, as NVML does
 *
 * Built with -DFAKE_NVML_WITHOUT_<entry point> (fake_nvml.py: without=...), the library lacks that entry point, as
 * one older than it does; pynvml then raises NVMLError_FunctionNotFound.
 * fakeNvmlCalls(name) says how often the entry point name was called since the last init began, init included;
 * fakeNvmlCalls(NULL) counts all of them.
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
#define NVML_ERROR_LIBRARY_NOT_FOUND 12
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_UNKNOWN 999

#define MAX_GPUS 64
#define MAX_MIG 16
#define FIELD 96
#define LIST 2048
/* The per-GPU values "unsupported" and "error", as a query's answer and as per_gpu's result. */
#define UNSUPPORTED (-1)
#define FAILING (-2)

/* A GPU, or one of its MIG devices (parent set): NVML hands both out as nvmlDevice_t. */
struct fake_device {
    unsigned int index;
    unsigned int minor;
    char uuid[FIELD];
    char name[FIELD];
    unsigned int mig_current;
    unsigned int mig_pending;
    int mig_unsupported;
    int lost;
    int brand;       /* UNSUPPORTED, FAILING or the value */
    int arch_major;  /* UNSUPPORTED, FAILING or the value */
    int arch_minor;
    int mig_max;     /* UNSUPPORTED, FAILING or the value */
    struct fake_device *parent;
    int present;
    unsigned int gpu_instance;
    unsigned int compute_instance;
};
typedef struct fake_device *nvmlDevice_t;

static struct fake_device devices[MAX_GPUS];
static struct fake_device mig_devices[MAX_GPUS][MAX_MIG];
static unsigned int device_count;
static char driver_version[FIELD];
static int cuda_version;
static int cuda_version_v1;
static unsigned int init_count;

struct call_count {
    const char *name;
    unsigned int count;
};
static struct call_count calls[64];
static unsigned int call_names;

static void count_call(const char *name) {
    unsigned int i;
    for (i = 0; i < call_names; i++) {
        if (strcmp(calls[i].name, name) == 0) {
            calls[i].count++;
            return;
        }
    }
    if (call_names < sizeof(calls) / sizeof(calls[0])) {
        calls[call_names].name = name;
        calls[call_names++].count = 1;
    }
}

unsigned int fakeNvmlCalls(const char *name) {
    unsigned int i, total = 0;
    for (i = 0; i < call_names; i++) {
        if (name == NULL || strcmp(calls[i].name, name) == 0)
            total += calls[i].count;
    }
    return total;
}

static int enabled(const char *variable) {
    const char *value = getenv(variable);
    return value != NULL && *value != '\0' && strcmp(value, "0") != 0;
}

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

/*
 * GPU index's value of a per-GPU variable into value (LIST bytes): 1 when set, 0 when not, UNSUPPORTED or FAILING
 * for those words.
 * An "index:value" entry wins over a bare "value" wherever either stands.
 */
static int per_gpu(const char *variable, unsigned int index, char *value) {
    const char *entry = getenv(variable);
    int found = 0, exact = 0;
    while (entry != NULL && *entry != '\0' && !exact) {
        const char *end = strchr(entry, ',');
        size_t length = end ? (size_t)(end - entry) : strlen(entry);
        size_t digits = strspn(entry, "0123456789");
        const char *start = entry;
        if (digits > 0 && digits < length && entry[digits] == ':') {
            if (strtoul(entry, NULL, 10) != index) {
                entry = end ? end + 1 : NULL;
                continue;
            }
            start = entry + digits + 1;
            length -= digits + 1;
            exact = 1;
        }
        if (length >= LIST)
            length = LIST - 1;
        memcpy(value, start, length);
        value[length] = '\0';
        found = 1;
        entry = end ? end + 1 : NULL;
    }
    if (!found)
        return 0;
    if (strcmp(value, "unsupported") == 0)
        return UNSUPPORTED;
    return strcmp(value, "error") == 0 ? FAILING : 1;
}

static void load_mig_devices(struct fake_device *device, char *list) {
    unsigned int slot = 0;
    char *entry = list;
    while (entry != NULL && slot < MAX_MIG) {
        char *next = strchr(entry, ';');
        char *ids;
        struct fake_device *mig = &mig_devices[device->index][slot];
        if (next != NULL)
            *next++ = '\0';
        memset(mig, 0, sizeof(*mig));
        mig->index = slot;
        mig->parent = device;
        mig->gpu_instance = slot;
        ids = strchr(entry, '@');
        if (ids != NULL) {
            *ids++ = '\0';
            if (sscanf(ids, "%u.%u", &mig->gpu_instance, &mig->compute_instance) != 2)
                fprintf(stderr, "fake NVML: MIG ids %s are not gi.ci\n", ids);
        }
        mig->present = *entry != '\0';
        copy_field(mig->uuid, entry, strlen(entry));
        slot++;
        entry = next;
    }
}

static void load_device_values(struct fake_device *device) {
    char value[LIST];
    int state;

    state = per_gpu("FAKE_NVML_BRAND", device->index, value);
    device->brand = state < 0 ? state : state > 0 ? atoi(value) : 2;

    state = per_gpu("FAKE_NVML_ARCH", device->index, value);
    device->arch_major = 8;
    device->arch_minor = 0;
    if (state < 0)
        device->arch_major = state;
    else if (state > 0 && sscanf(value, "%d.%d", &device->arch_major, &device->arch_minor) != 2)
        fprintf(stderr, "fake NVML: arch %s is not major.minor\n", value);

    state = per_gpu("FAKE_NVML_MIG_MAX", device->index, value);
    device->mig_max = device->mig_unsupported ? UNSUPPORTED : state < 0 ? state : state > 0 ? atoi(value) : 7;

    memset(mig_devices[device->index], 0, sizeof(mig_devices[device->index]));
    if (per_gpu("FAKE_NVML_MIG_DEVICES", device->index, value) > 0)
        load_mig_devices(device, value);
}

static void load_configuration(void) {
    const char *value = getenv("FAKE_NVML_DRIVER");
    copy_field(driver_version, value ? value : "550.54.15", strlen(value ? value : "550.54.15"));
    value = getenv("FAKE_NVML_CUDA");
    cuda_version = value && *value ? atoi(value) : 12040;
    value = getenv("FAKE_NVML_CUDA_V1");
    cuda_version_v1 = value && *value ? atoi(value) : cuda_version;

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
        load_device_values(device);
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

/* Every entry point counts itself only: one that calls another would count a single call of the caller's twice. */
static nvmlReturn_t init(const char *entry_point) {
    call_names = 0;
    count_call(entry_point);
    load_configuration();
    create_nodes();
    if (enabled("FAKE_NVML_FAIL_INIT"))
        return NVML_ERROR_DRIVER_NOT_LOADED;
    init_count++;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    return init(__func__);
}

nvmlReturn_t nvmlInit_v2(void) { return init(__func__); }

nvmlReturn_t nvmlInit(void) { return init(__func__); }

nvmlReturn_t nvmlShutdown(void) {
    count_call(__func__);
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
    case NVML_ERROR_LIBRARY_NOT_FOUND:
        return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
        return "Function Not Found";
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
    count_call(__func__);
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    return copy_out(driver_version, version, length);
}

#ifndef FAKE_NVML_WITHOUT_nvmlSystemGetCudaDriverVersion_v2
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) {
    count_call(__func__);
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (version == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (listed("FAKE_NVML_NO_CUDA_VERSION", 2))
        return NVML_ERROR_NOT_SUPPORTED;
    if (enabled("FAKE_NVML_NO_LIBCUDA"))
        return NVML_ERROR_LIBRARY_NOT_FOUND;
    *version = cuda_version;
    return NVML_SUCCESS;
}
#endif

#ifndef FAKE_NVML_WITHOUT_nvmlSystemGetCudaDriverVersion
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version) {
    count_call(__func__);
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (version == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (listed("FAKE_NVML_NO_CUDA_VERSION", 1))
        return NVML_ERROR_NOT_SUPPORTED;
    *version = cuda_version_v1;
    return NVML_SUCCESS;
}
#endif

static nvmlReturn_t get_count(unsigned int *count) {
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (count == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = device_count;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    count_call(__func__);
    return get_count(count);
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) {
    count_call(__func__);
    return get_count(count);
}

static nvmlReturn_t get_handle(unsigned int index, nvmlDevice_t *device) {
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || index >= device_count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    count_call(__func__);
    return get_handle(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    count_call(__func__);
    return get_handle(index, device);
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

/* inline: a build without every entry point that uses it must not warn. */
static inline nvmlReturn_t failure(int value) {
    return value == UNSUPPORTED ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_UNKNOWN;
}

/* Likewise for a MIG device: one this init configured, of a GPU whose MIG mode is on. */
static nvmlReturn_t check_mig_handle(nvmlDevice_t device) {
    struct fake_device *first = &mig_devices[0][0];
    nvmlReturn_t result;
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || device < first || device >= first + MAX_GPUS * MAX_MIG || !device->present)
        return NVML_ERROR_INVALID_ARGUMENT;
    result = check_handle(device->parent);
    if (result != NVML_SUCCESS)
        return result;
    return device->parent->mig_current ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor) {
    nvmlReturn_t result = check_handle(device);
    count_call(__func__);
    if (result != NVML_SUCCESS)
        return result;
    if (minor == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *minor = device->minor;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    nvmlReturn_t result = check_handle(device);
    count_call(__func__);
    if (result == NVML_ERROR_INVALID_ARGUMENT)
        result = check_mig_handle(device);
    if (result != NVML_SUCCESS)
        return result;
    return copy_out(device->uuid, uuid, length);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    nvmlReturn_t result = check_handle(device);
    count_call(__func__);
    if (result != NVML_SUCCESS)
        return result;
    return copy_out(device->name, name, length);
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending) {
    nvmlReturn_t result = check_handle(device);
    count_call(__func__);
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

#ifndef FAKE_NVML_WITHOUT_nvmlDeviceGetBrand
nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, unsigned int *brand) {
    nvmlReturn_t result = check_handle(device);
    count_call(__func__);
    if (result != NVML_SUCCESS)
        return result;
    if (brand == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (device->brand < 0)
        return failure(device->brand);
    *brand = (unsigned int)device->brand;
    return NVML_SUCCESS;
}
#endif

#ifndef FAKE_NVML_WITHOUT_nvmlDeviceGetCudaComputeCapability
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    nvmlReturn_t result = check_handle(device);
    count_call(__func__);
    if (result != NVML_SUCCESS)
        return result;
    if (major == NULL || minor == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (device->arch_major < 0)
        return failure(device->arch_major);
    *major = device->arch_major;
    *minor = device->arch_minor;
    return NVML_SUCCESS;
}
#endif

#ifndef FAKE_NVML_WITHOUT_nvmlDeviceGetMaxMigDeviceCount
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
    nvmlReturn_t result = check_handle(device);
    count_call(__func__);
    if (result != NVML_SUCCESS)
        return result;
    if (count == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (device->mig_max < 0)
        return failure(device->mig_max);
    *count = (unsigned int)device->mig_max;
    return NVML_SUCCESS;
}
#endif

#ifndef FAKE_NVML_WITHOUT_nvmlDeviceGetMigDeviceHandleByIndex
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *mig) {
    nvmlReturn_t result = check_handle(device);
    count_call(__func__);
    if (result != NVML_SUCCESS)
        return result;
    if (mig == NULL || device->mig_max < 0 || index >= (unsigned int)device->mig_max)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!device->mig_current || index >= MAX_MIG || !mig_devices[device->index][index].present)
        return NVML_ERROR_NOT_FOUND;
    *mig = &mig_devices[device->index][index];
    return NVML_SUCCESS;
}
#endif

#ifndef FAKE_NVML_WITHOUT_nvmlDeviceGetGpuInstanceId
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id) {
    nvmlReturn_t result = check_mig_handle(device);
    count_call(__func__);
    if (result != NVML_SUCCESS)
        return result;
    if (id == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *id = device->gpu_instance;
    return NVML_SUCCESS;
}
#endif

#ifndef FAKE_NVML_WITHOUT_nvmlDeviceGetComputeInstanceId
nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id) {
    nvmlReturn_t result = check_mig_handle(device);
    count_call(__func__);
    if (result != NVML_SUCCESS)
        return result;
    if (id == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *id = device->compute_instance;
    return NVML_SUCCESS;
}
#endif
