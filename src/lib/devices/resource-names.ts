/**
 * The names a DeviceClass is known by outside nfdctl, shared by the device plugins, the agent and DRA: the
 * extended resource kubelet advertises, the pod annotation that asks for classes, the container annotation
 * and environment variable a container gets, and DRA's resource.k8s.io DeviceClass.
 */

/** The API group of DeviceClasses, and the domain of every name below. */
export const resourceDomain = 'devices.nfdctl.io'

/** The extended resource a class is requested by: `devices.nfdctl.io/<class>`. */
export const resourceNameOf = (className: string): string => `${resourceDomain}/${className}`

/** The pod annotation that asks for classes for one container: `devices.nfdctl.io/<container>: class-a,class-b`. */
export const podAnnotationOf = (containerName: string): string => `${resourceDomain}/${containerName}`

/** The container annotation naming the class and the IDs kubelet allocated from it. */
export const annotationOf = (className: string): string => `classes.${resourceDomain}/${className}`

/** The environment variable a container gets from a class: NFDCTL_DEVICES_<CLASS> = its device nodes. */
export const envNameOf = (className: string): string => `NFDCTL_DEVICES_${className.toUpperCase().replaceAll(/[^A-Z0-9]/g, '_')}`

/** Where the marker device nodes of claims go inside a container (`<dir>/<claim uid>/<device>`, dra/claim-cdi.ts). */
export const claimMarkerDir = '/dev/nfdctl/claims'

/** The resource.k8s.io DeviceClass DRA knows a class by: `<class>.devices.nfdctl.io`, named like other drivers' classes. */
export const draClassName = (className: string): string => `${className}.${resourceDomain}`
