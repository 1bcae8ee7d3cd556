/**
 * The one statement of what a DeviceClass (devices.nfdctl.io/v1alpha1) is: the CRD's openAPIV3Schema with
 * its CEL rules. deploy/crds/deviceclasses.devices.nfdctl.io.yaml is produced from it (`npm run
 * generate:crd`, device-class-crd.ts) and validateDeviceClass checks class objects and files against it.
 *
 * Beside the Kubernetes keywords, each node may carry what only nfdctl reads; the CRD leaves it out:
 * - `x-nfdctl-text`: how validateDeviceClass words an issue at this field;
 * - `check` on each CEL rule: the same rule in TypeScript (CEL cannot run here), kept next to it;
 * - `x-nfdctl-checks`: rules the CRD cannot state, checked only by nfdctl (glob syntax).
 */
import {identitySources} from './device-identity.js'
import {globProblem} from './glob.js'
import {labelKeyProblem} from './label-selector.js'

export type SchemaKeyword = 'enum' | 'maxItems' | 'maxLength' | 'maxProperties' | 'minimum' | 'minItems' | 'minLength' | 'minProperties' | 'pattern' | 'type'

/**
 * Wording of the validator's issues at one field. Placeholders: {got} the value as a message shows it,
 * {length} a string's length, {count} the items or entries, {limit} the keyword's bound, {fields} the
 * fields the node declares.
 */
export interface FieldText {
  /** What a valid value is: "must be <is> (got {got})" for any keyword `on` does not name. */
  readonly is?: string
  /** The whole message when the field is required and absent. */
  readonly required?: string
  /** Whole messages for particular keywords. */
  readonly on?: Partial<Record<SchemaKeyword, string | ((value: unknown) => string)>>
  /** Names a mapping whose unknown fields are mistakes ("unknown field; <fieldsOf> takes …"); elsewhere they are pruned silently, as the API server prunes them. */
  readonly fieldsOf?: string
}

/** One x-kubernetes-validations entry. */
export interface CelRule {
  readonly rule: string
  readonly message: string
  readonly fieldPath?: string
  readonly reason?: 'FieldValueDuplicate' | 'FieldValueForbidden' | 'FieldValueInvalid' | 'FieldValueRequired'
  /** The rule in TypeScript, on the same pruned and defaulted value: one issue per failure. Not in the CRD. */
  readonly check: (self: unknown) => readonly RuleIssue[]
}

/** A rule only nfdctl checks, because neither the schema nor CEL (within its cost budget) can state it. */
export interface LocalRule {
  readonly check: (self: unknown) => readonly RuleIssue[]
}

/** Where a rule failed (`at`, below the node) and the message. */
export interface RuleIssue {
  readonly at?: ReadonlyArray<number | string>
  /** {got} is the value at `at`. */
  readonly message: string
}

/** A node of a Kubernetes structural schema (the keywords this CRD uses), plus nfdctl's own. */
export interface SchemaNode {
  readonly type: 'array' | 'integer' | 'object' | 'string'
  readonly description?: string
  readonly format?: string
  readonly default?: string
  readonly enum?: readonly string[]
  readonly pattern?: string
  readonly minLength?: number
  readonly maxLength?: number
  readonly minimum?: number
  readonly minItems?: number
  readonly maxItems?: number
  readonly minProperties?: number
  readonly maxProperties?: number
  readonly required?: readonly string[]
  readonly properties?: Readonly<Record<string, SchemaNode>>
  readonly additionalProperties?: SchemaNode
  readonly items?: SchemaNode
  readonly 'x-kubernetes-list-type'?: 'atomic' | 'map'
  readonly 'x-kubernetes-list-map-keys'?: readonly string[]
  readonly 'x-kubernetes-map-type'?: 'atomic'
  readonly 'x-kubernetes-validations'?: readonly CelRule[]
  readonly 'x-nfdctl-text'?: FieldText
  readonly 'x-nfdctl-checks'?: readonly LocalRule[]
}

const labelSelectorOperators = ['In', 'NotIn', 'Exists', 'DoesNotExist'] as const
// Consumers treat a missing capacity as 1; the CRD has no default for it (see capacity below).
export const deviceClassDefaults = {allocation: 'Class', capacity: 1, permissions: 'rw'} as const

// CEL's has(self.field) and size(), on the plain value the twins receive.
const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)
const field = (self: unknown, name: string): unknown => (isRecord(self) ? self[name] : undefined)
const size = (value: unknown): number => (Array.isArray(value) ? value.length : 0)
const celList = (values: readonly string[]): string => `[${values.map((v) => `'${v}'`).join(', ')}]`

const labelKeyMessage = "must be a label key: an optional DNS subdomain prefix and '/', then a name of at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
const labelKeyIssue = (key: unknown, at?: string[]): RuleIssue[] => {
  const problem = typeof key === 'string' ? labelKeyProblem(key) : undefined
  return problem === undefined ? [] : [{at, message: `${problem} (got {got})`}]
}

const labelValue: SchemaNode = {
  type: 'string',
  maxLength: 63,
  pattern: '^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$',
  'x-nfdctl-text': {
    is: "a label value: empty, or at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
    // YAML reads unquoted true, 1 or 2.0 as non-strings; label values are always strings.
    on: {type: 'must be a string label value; quote it in YAML, such as "true" (got {got})'},
  },
}

/**
 * Caps on what one class may hold. Each device event matches every glob of every class on the node, on
 * the agents' and plugins' event loop, and the API server estimates CEL costs from these bounds. Real
 * classes stay far below them: a glob is a kernel name or a udev value (ID_PATH, ID_SERIAL and model
 * strings run under 100 characters), the kernel's subsystem names under 20, and a class has a few rules
 * of a few properties or attributes each.
 */
const deviceClassLimits = {globLength: 256, subsystemLength: 64, rules: 32, entries: 32} as const

/** Globs must be in the syntax glob.ts matches: balanced brackets, no extglobs or braces (glob.ts reads them literally). */
const globSyntax: LocalRule = {
  check: (self) => {
    const problem = typeof self === 'string' && self.length > 0 ? globProblem(self) : undefined
    return problem === undefined ? [] : [{message: `is not a valid glob (got {got}): ${problem}`}]
  },
}

function glob(description: string, example: string): SchemaNode {
  return {
    description,
    type: 'string',
    minLength: 1,
    maxLength: deviceClassLimits.globLength,
    'x-nfdctl-checks': [globSyntax],
    'x-nfdctl-text': {
      is: `a non-empty glob string, such as ${example}`,
      on: {
        maxLength: 'must be at most {limit} characters (got {length}); shorten it with a *',
        // YAML reads an unquoted 0403 as the number 403: the usual way a vendor id goes wrong.
        type: (value) => `must be a non-empty glob string${typeof value === 'number' ? '; quote it in YAML,' : ','} such as ${example} (got {got})`,
      },
    },
  }
}

function globMap(description: string, what: string, whats: string, example: string): SchemaNode {
  return {
    description,
    type: 'object',
    minProperties: 1,
    maxProperties: deviceClassLimits.entries,
    additionalProperties: glob(`A glob over the ${what}'s value.`, '"0403"'),
    'x-nfdctl-text': {
      is: `a mapping of ${what} names to globs, such as ${example}`,
      on: {
        maxProperties: `must name at most {limit} ${whats} (got {count}); match fewer, or split the rule`,
        minProperties: `must name at least one ${what}, such as ${example}; or remove it`,
      },
    },
    // Map keys have no schema of their own: CEL checks them (within the cost budget thanks to the caps).
    'x-kubernetes-validations': [
      {
        rule: "self.all(k, k != '')",
        message: `${what} names must not be empty`,
        check: (self) =>
          Object.keys(isRecord(self) ? self : {})
            .filter((k) => k === '')
            .map((k) => ({at: [k], message: `${what} names must not be empty`})),
      },
    ],
  }
}

/**
 * A metav1.LabelSelector: node labels for nodeSelector, namespace labels for annotationAccess. `text` words
 * the selector's own issues where the default does not fit (its unknown fields are always "a LabelSelector"'s).
 */
const labelSelector = (description: string, text: Omit<FieldText, 'fieldsOf'> = {is: 'a LabelSelector mapping with matchLabels and/or matchExpressions'}): SchemaNode => ({
  description,
  type: 'object',
  'x-kubernetes-map-type': 'atomic',
  'x-nfdctl-text': {fieldsOf: 'a LabelSelector', ...text},
  properties: {
    matchLabels: {
      type: 'object',
      maxProperties: 64,
      additionalProperties: labelValue,
      'x-nfdctl-text': {is: 'a mapping of label keys to values', on: {maxProperties: 'must have at most {limit} labels (got {count})'}},
      // Map keys have no schema of their own: CEL checks them.
      'x-kubernetes-validations': [
        {
          rule: 'self.all(k, !format.qualifiedName().validate(k).hasValue())',
          message: "keys must be label keys: an optional DNS subdomain prefix and '/', then a name of at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric",
          check: (self) => Object.keys(isRecord(self) ? self : {}).flatMap((key) => labelKeyIssue(key, [key])),
        },
      ],
    },
    matchExpressions: {
      type: 'array',
      maxItems: 64,
      'x-kubernetes-list-type': 'atomic',
      'x-nfdctl-text': {is: 'a list of {key, operator, values}', on: {maxItems: 'must have at most {limit} expressions (got {count})'}},
      items: {
        type: 'object',
        required: ['key', 'operator'],
        'x-nfdctl-text': {fieldsOf: 'a selector expression', is: 'a mapping {key, operator, values}'},
        'x-kubernetes-validations': [
          {
            rule: "!(self.operator in ['In', 'NotIn']) || (has(self.values) && size(self.values) > 0)",
            message: 'operators In and NotIn need at least one value',
            fieldPath: '.values',
            check: (self) => {
              const operator = field(self, 'operator')
              return (operator === 'In' || operator === 'NotIn') && size(field(self, 'values')) === 0 ? [{at: ['values'], message: `operator ${operator} needs at least one value`}] : []
            },
          },
          {
            rule: "!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values) || size(self.values) == 0",
            message: 'operators Exists and DoesNotExist take no values',
            fieldPath: '.values',
            check: (self) => {
              const operator = field(self, 'operator')
              return (operator === 'Exists' || operator === 'DoesNotExist') && size(field(self, 'values')) > 0 ? [{at: ['values'], message: `operator ${operator} takes no values; remove values`}] : []
            },
          },
        ],
        properties: {
          key: {
            type: 'string',
            maxLength: 317,
            'x-nfdctl-text': {is: 'a label key string', required: 'required: the label key to test'},
            'x-kubernetes-validations': [
              {
                rule: '!format.qualifiedName().validate(self).hasValue()',
                message: labelKeyMessage,
                check: (self) => labelKeyIssue(self),
              },
            ],
          },
          operator: {
            type: 'string',
            enum: labelSelectorOperators,
            'x-nfdctl-text': {is: `one of ${labelSelectorOperators.join(', ')}`, required: `required: one of ${labelSelectorOperators.join(', ')}`},
          },
          values: {
            type: 'array',
            maxItems: 256,
            'x-kubernetes-list-type': 'atomic',
            items: labelValue,
            'x-nfdctl-text': {is: 'a list of label values', on: {maxItems: 'must have at most {limit} values (got {count})'}},
          },
        },
      },
    },
  },
})

const nodeSelector = labelSelector('The nodes this class applies to (a LabelSelector); empty or absent means every node.')

const annotationAccess: SchemaNode = {
  description:
    'Who may take this class with the pod annotation devices.nfdctl.io/<container>: <class> (access without '
    + 'scheduling accounting). Absent: nobody, the annotation is refused. namespaceSelector selects the admitted '
    + 'namespaces by their labels (kubernetes.io/metadata.name selects one by name); {} admits every namespace.',
  type: 'object',
  required: ['namespaceSelector'],
  'x-nfdctl-text': {
    fieldsOf: 'annotationAccess',
    is: 'a mapping {namespaceSelector: <LabelSelector>}',
  },
  properties: {
    namespaceSelector: labelSelector('The namespaces whose pods may take the class by annotation; {} is every namespace.', {
      is: 'a LabelSelector mapping with matchLabels and/or matchExpressions ({} admits every namespace)',
      required: 'required: a LabelSelector over namespace labels, such as {matchLabels: {kubernetes.io/metadata.name: lab}}; {} admits every namespace',
    }),
  },
}

/** A Go duration of hours, minutes and seconds, as kubectl and Pod specs write them: 30s, 5m, 1h30m. */
const durationPattern = '^([0-9]+h)?([0-9]+m)?([0-9]+s)?$'

const unplugged: SchemaNode = {
  description:
    'Allocation DRA only: how the ResourceSlice lists a device of the class that is unplugged. It stays listed, with the taint '
    + 'devices.nfdctl.io/unplugged, until the same device (by identity) is plugged in again. effect NoSchedule (the default): no new '
    + 'claim gets it, pods holding it keep running. effect NoExecute: after noExecuteAfter (default 0s) the taint becomes NoExecute '
    + 'and kube-controller-manager evicts the pods whose claims hold it (unless they tolerate the taint). A device in several classes takes the strictest.',
  type: 'object',
  'x-nfdctl-text': {fieldsOf: 'unplugged', is: 'a mapping {effect: NoSchedule|NoExecute, noExecuteAfter: <duration>}'},
  'x-kubernetes-validations': [
    {
      rule: "!has(self.noExecuteAfter) || self.effect == 'NoExecute'",
      message: 'noExecuteAfter applies only to effect NoExecute',
      fieldPath: '.noExecuteAfter',
      reason: 'FieldValueForbidden',
      check: (self) =>
        field(self, 'noExecuteAfter') !== undefined && field(self, 'effect') !== 'NoExecute'
          ? [{at: ['noExecuteAfter'], message: 'noExecuteAfter applies only to effect NoExecute; remove it or set effect: NoExecute'}]
          : [],
    },
  ],
  properties: {
    effect: {
      description: 'NoSchedule: an unplugged device is not allocated to new claims. NoExecute: also the pods holding it are evicted, after noExecuteAfter.',
      type: 'string',
      default: 'NoSchedule',
      enum: ['NoSchedule', 'NoExecute'],
      'x-nfdctl-text': {is: 'NoSchedule or NoExecute'},
    },
    noExecuteAfter: {
      description: 'effect NoExecute only: how long a device stays unplugged (NoSchedule) before its taint becomes NoExecute, such as 30s, 5m or 1h30m; absent means at once.',
      type: 'string',
      minLength: 2,
      maxLength: 16,
      pattern: durationPattern,
      'x-nfdctl-text': {is: 'a duration of hours, minutes and seconds, such as 30s, 5m or 1h30m'},
    },
  },
}

const matchRule: SchemaNode = {
  type: 'object',
  // At least one of the four fields; unknown fields are pruned first, so a rule holding only unknown
  // fields fails here too.
  minProperties: 1,
  'x-nfdctl-text': {fieldsOf: 'a match rule', is: 'a mapping with at least one of {fields}', on: {minProperties: 'needs at least one of {fields}'}},
  properties: {
    subsystem: {
      description: 'Exact subsystem name, e.g. tty.',
      type: 'string',
      minLength: 1,
      maxLength: deviceClassLimits.subsystemLength,
      'x-nfdctl-text': {is: 'a non-empty string such as "tty"', on: {maxLength: 'must be at most {limit} characters (got {length}); subsystem names are short, such as "tty"'}},
    },
    devName: glob('Glob over the kernel name (DEVNAME without /dev/), e.g. ttyUSB*.', '"ttyUSB*"'),
    properties: globMap('uevent/udev properties; values are globs.', 'property', 'properties', '{ID_VENDOR_ID: "0403"}'),
    attributes: globMap('sysfs attributes of the device or any parent; values are globs.', 'attribute', 'attributes', '{idVendor: "0403"}'),
  },
}

/**
 * Devices that hand the node itself to whoever holds them: /dev/mem, /dev/kmem, /dev/port and /dev/kmsg (the
 * mem subsystem's other members are harmless), and block devices that back the node's mounts or swap. A class
 * serves them only with spec.hostCritical: Allow. The API server can see only what a class names outright, a
 * mem rule other than the harmless names or one of those four kernel names; which disk backs `/` is known
 * on the node alone, where the agent refuses the devices themselves (host-critical.ts).
 */
const harmlessMemDevices = ['null', 'zero', 'full', 'random', 'urandom'] as const
const criticalMemDevices = ['mem', 'kmem', 'port', 'kmsg'] as const

const namesHostCritical = (rule: unknown): boolean => {
  const subsystem = field(rule, 'subsystem')
  const devName = field(rule, 'devName')
  if (subsystem === 'mem') return typeof devName !== 'string' || !(harmlessMemDevices as readonly string[]).includes(devName)
  return typeof devName === 'string' && (criticalMemDevices as readonly string[]).includes(devName)
}

const hostCriticalOptIn: CelRule = {
  rule:
    `(has(self.hostCritical) && self.hostCritical == 'Allow') || !self.match.exists(r, has(r.subsystem) && r.subsystem == 'mem' ? !has(r.devName) || !(r.devName in ${celList(harmlessMemDevices)}) : `
    + `has(r.devName) && r.devName in ${celList(criticalMemDevices)})`,
  message: `a rule names host-critical devices (the mem subsystem beyond ${harmlessMemDevices.join(', ')}, or ${criticalMemDevices.join(', ')}): whoever holds them owns the node; set hostCritical: Allow to serve them`,
  fieldPath: '.hostCritical',
  reason: 'FieldValueRequired',
  check: (self) => {
    if (field(self, 'hostCritical') === 'Allow') return []
    const rules = field(self, 'match')
    return (Array.isArray(rules) ? rules : []).flatMap((rule, i) =>
      namesHostCritical(rule)
        ? [
            {
              at: ['match', i],
              message: `names host-critical devices (/dev/mem, /dev/kmem, /dev/port, /dev/kmsg: the mem subsystem beyond ${harmlessMemDevices.join(', ')}), which give whoever holds them the node; name only the devices meant, such as {subsystem: mem, devName: null}, or set spec.hostCritical: Allow`,
            },
          ]
        : [],
    )
  },
}

const spec: SchemaNode = {
  type: 'object',
  required: ['match'],
  'x-nfdctl-text': {
    fieldsOf: 'spec',
    is: 'a mapping with match and optionally nodeSelector, permissions, allocation, capacity, identity, annotationAccess, unplugged, hostCritical',
    required: 'required: a mapping with match (the device rules) and optionally nodeSelector, permissions, allocation, capacity',
  },
  'x-kubernetes-validations': [
    {
      rule: "!has(self.annotationAccess) || self.allocation == 'Class'",
      message: 'annotationAccess applies only to allocation Class: with allocation Device or DRA each device is a unit given to one container',
      fieldPath: '.annotationAccess',
      reason: 'FieldValueForbidden',
      check: (self) =>
        field(self, 'annotationAccess') !== undefined && field(self, 'allocation') !== 'Class'
          ? [
              {
                at: ['annotationAccess'],
                message:
                  'annotationAccess applies only to allocation Class (with allocation Device or DRA each device is a unit given to one container); remove it, or ask by resource limit or ResourceClaim',
              },
            ]
          : [],
    },
    {
      rule: "!has(self.capacity) || self.allocation == 'Class'",
      message: 'capacity applies only to allocation Class',
      fieldPath: '.capacity',
      reason: 'FieldValueForbidden',
      check: (self) =>
        field(self, 'capacity') !== undefined && field(self, 'allocation') !== 'Class'
          ? [{at: ['capacity'], message: 'capacity applies only to allocation Class; remove it (each device is one unit) or set allocation: Class'}]
          : [],
    },
    {
      rule: "!has(self.unplugged) || self.allocation == 'DRA'",
      message: 'unplugged applies only to allocation DRA: it says how the ResourceSlice lists an unplugged device',
      fieldPath: '.unplugged',
      reason: 'FieldValueForbidden',
      check: (self) =>
        field(self, 'unplugged') !== undefined && field(self, 'allocation') !== 'DRA'
          ? [{at: ['unplugged'], message: 'unplugged applies only to allocation DRA (it says how the ResourceSlice lists an unplugged device); remove it or set allocation: DRA'}]
          : [],
    },
    hostCriticalOptIn,
  ],
  properties: {
    nodeSelector,
    match: {
      description: 'A device is in the class when ANY rule matches; within a rule every field must match.',
      type: 'array',
      minItems: 1,
      maxItems: deviceClassLimits.rules,
      'x-kubernetes-list-type': 'atomic',
      items: matchRule,
      'x-nfdctl-text': {
        is: 'a list of rules',
        on: {
          maxItems: 'must have at most {limit} rules (got {count}); widen a rule with a glob, or split the class',
          minItems: 'must have at least one rule, such as {subsystem: tty, devName: "ttyUSB*"}',
        },
        required: 'required: a list of rules, at least one (a device is in the class when any rule matches)',
      },
    },
    permissions: {
      description: 'Device access, letters from r (read), w (write), m (mknod), each at most once.',
      type: 'string',
      default: deviceClassDefaults.permissions,
      // Kubernetes patterns are RE2 (no lookaheads, no backreferences): list the 15 permutations.
      pattern: '^(r|w|m|rw|wr|rm|mr|wm|mw|rwm|rmw|wrm|wmr|mrw|mwr)$',
      'x-nfdctl-text': {is: 'letters from r, w, m, each once'},
    },
    allocation: {
      description:
        'Class: a container gets every device of the class, now and later. Device: each device is one schedulable unit (kubelet device plugin). DRA: each device is allocated through Dynamic Resource Allocation (ResourceClaims of the resource.k8s.io DeviceClass <class>.devices.nfdctl.io), served by devices agent --dra.',
      type: 'string',
      default: deviceClassDefaults.allocation,
      enum: ['Class', 'Device', 'DRA'],
      'x-nfdctl-text': {is: 'Class, Device or DRA'},
    },
    identity: {
      description:
        'What the class follows a device by, so that a device plugged in again is the same device (its claims and allocations come back to it). Serial: its serial number (udev ID_SERIAL_SHORT) when it has one, on any port; without one, its port (ID_PATH). Port: the port, whatever is plugged into it. SerialAndPort: its serial number at its port (at its sysfs path where udev names no port), so that a device that copies the serial number of another is another device unless it is in that port: for classes shared by tenants; without a serial number, its port. Absent means Serial. Two present devices of the class with one identity are served to nobody.',
      type: 'string',
      enum: identitySources,
      'x-nfdctl-text': {is: 'Serial, Port or SerialAndPort'},
    },
    // No server-side default on purpose: capacity applies only to allocation Class, and a default would be
    // written into allocation Device objects too, which the CEL rule on spec rejects.
    capacity: {
      description: 'Allocation Class only, how many containers may hold the class at once; absent means 1.',
      type: 'integer',
      format: 'int32',
      minimum: 1,
      'x-nfdctl-text': {is: 'a whole number >= 1'},
    },
    annotationAccess,
    unplugged,
    hostCritical: {
      description:
        'Allow: the class may serve host-critical devices (/dev/mem, /dev/kmem, /dev/port, /dev/kmsg, and block devices that back '
        + "the node's mounts or swap), which give whoever holds them the node. Refuse, or absent: such devices are left out of "
        + 'the class on every node and reported in its status.',
      type: 'string',
      enum: ['Refuse', 'Allow'],
      'x-nfdctl-text': {is: 'Refuse or Allow'},
    },
  },
}

const nodeStatus: SchemaNode = {
  type: 'object',
  required: ['node'],
  properties: {
    node: {type: 'string'},
    devices: {
      type: 'array',
      'x-kubernetes-list-type': 'atomic',
      items: {
        type: 'object',
        required: ['id'],
        properties: {
          id: {type: 'string'},
          devName: {type: 'string'},
          major: {type: 'integer', format: 'int32', minimum: 0},
          minor: {type: 'integer', format: 'int32', minimum: 0},
        },
      },
    },
    refused: {
      description: 'Devices the class matches on this node but serves to nobody, and why (ExclusiveOverlap, DuplicateIdentity, HostCritical).',
      type: 'array',
      'x-kubernetes-list-type': 'atomic',
      items: {
        type: 'object',
        required: ['id', 'reason'],
        properties: {
          id: {type: 'string'},
          devName: {type: 'string'},
          reason: {type: 'string'},
          message: {type: 'string'},
        },
      },
    },
    problems: {
      description: 'What keeps this node from serving the class as asked, whatever the device (RuntimeWithoutCDI: claims of a DRA class are refused).',
      type: 'array',
      'x-kubernetes-list-type': 'atomic',
      items: {
        type: 'object',
        required: ['reason'],
        properties: {
          reason: {type: 'string'},
          message: {type: 'string'},
        },
      },
    },
    holders: {
      description: 'How many running containers on this node hold the class (a count, not names: see docs/security.md).',
      type: 'integer',
      format: 'int32',
      minimum: 0,
    },
    observedGeneration: {type: 'integer', format: 'int64', minimum: 0},
    lastUpdateTime: {type: 'string', format: 'date-time'},
  },
}

const condition: SchemaNode = {
  type: 'object',
  required: ['type', 'status', 'lastTransitionTime', 'reason', 'message'],
  properties: {
    type: {
      type: 'string',
      maxLength: 316,
      pattern: '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$',
    },
    status: {type: 'string', enum: ['True', 'False', 'Unknown']},
    observedGeneration: {type: 'integer', format: 'int64', minimum: 0},
    lastTransitionTime: {type: 'string', format: 'date-time'},
    reason: {type: 'string', minLength: 1, maxLength: 1024, pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$'},
    message: {type: 'string', maxLength: 32_768},
  },
}

/** The CRD's openAPIV3Schema for v1alpha1, with nfdctl's wording and the TypeScript twins of its CEL rules. */
export const deviceClassSchema: SchemaNode = {
  type: 'object',
  required: ['spec'],
  properties: {
    apiVersion: {type: 'string'},
    kind: {type: 'string'},
    metadata: {
      type: 'object',
      'x-nfdctl-text': {is: 'a mapping with the class name'},
      properties: {
        // The name becomes the kubelet resource devices.nfdctl.io/<name>, whose name part is <= 63.
        name: {
          type: 'string',
          maxLength: 63,
          'x-nfdctl-text': {is: 'a string', on: {maxLength: 'must be at most {limit} characters, as it becomes the kubelet resource devices.nfdctl.io/<name> (got {length})'}},
        },
      },
    },
    spec,
    // The agents' output, never input: validateDeviceClass ignores it.
    status: {
      type: 'object',
      properties: {
        nodes: {
          description: "One entry per node; each node's agent writes only its own entry (server-side apply).",
          type: 'array',
          'x-kubernetes-list-type': 'map',
          'x-kubernetes-list-map-keys': ['node'],
          items: nodeStatus,
        },
        conditions: {
          description: 'Standard conditions (metav1.Condition): Valid, and on a DRA class LimitRequestsServed and UnpluggedDevicesTainted when the API server drops what the DRA driver writes.',
          type: 'array',
          'x-kubernetes-list-type': 'map',
          'x-kubernetes-list-map-keys': ['type'],
          items: condition,
        },
      },
    },
  },
}
