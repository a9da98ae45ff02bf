/**
 * `bgcut/core`: the framework-neutral API. The handler and its options, the adapter contract
 * (CoreRequest/CoreResponse, for writing an adapter of your own), key stores and key utilities,
 * plans, and the error catalogue. Everything else under src/core is internal.
 */
export { createRemoveBgHandler, DASHBOARD_KEY_ID, type RemoveBgHandler, type Route, type ApiDocsContext } from './handler.js';
export type { AccountSummary } from './account-summary.js';
export { ActivityRecorder, dayOf, lastDays, type ActivityBatch, type ActivityStore, type ActivityRecorderOptions } from './activity/recorder.js';
export { resolveOptions, type RemoveBgOptions, type InferenceOptions, type RequestLimits, type AccessLogEntry } from './options.js';
export type { CoreRequest, CoreResponse, IncomingHeaders } from './http-types.js';
export { ApiError, ERROR_CATALOG, problemOf, DEFAULT_PROBLEM_TYPE_BASE, type ErrorCode, type ProblemDetails } from './errors.js';
export type { Account, KeyRecord, KeyStore, KeyLookup, KeyAdmin, CreateKeyOptions } from './auth/key-store.js';
export { FileKeyStore, type FileKeyStoreOptions, type KeyFile } from './auth/file-key-store.js';
export { RedisKeyStore, type RedisKeyStoreOptions } from './auth/redis-key-store.js';
export { KeyAlreadyReplacedError, NotFoundError, TooManyKeysError } from './auth/key-records.js';
export { generateApiKey, hashApiKey, isWellFormedApiKey, keyIdOf, API_KEY_PREFIX } from './auth/api-key.js';
export { DEFAULT_PLANS, loadPlansFile, validatePlans, type Plan, type Plans, type MonthlyQuota } from './limits/plans.js';
export type { RedisFailureMode } from './limits/plan-enforcer.js';
export type { LocalUsageStore } from './limits/enforcer-options.js';
export type { QuotaStore } from './limits/quota-store.js';
export type { UsageMeter, Usage } from './limits/usage-meter.js';
export { ISNET_PROFILE, ISNET_FP32_PROFILE, PROFILES, type PreprocessingProfile, type ModelAbout, type ModeCost } from './image/profile.js';
export { modelProfile, type ModelProfileOptions } from './models/model-profile.js';
export { FAMILIES, type FamilyName, type FamilyFacts } from '../models/families.js';
export { KNOWN_MODELS, type KnownModel, type Licence } from '../models/known-models.js';
export type { ModelListEntry } from './models/model-list.js';
export { QUALITIES, QUALITY_QUOTA_WEIGHT, type Quality } from './image/multi-pass.js';
export { OUTPUT_OPTION_NAMES, OUTPUT_OPTION_DEFINITIONS, DEFAULT_OUTPUT, type OutputOptions, type OutputOptionName, type OutputOptionDefinition } from './output-options.js';
export { connectRedis, parseRedisUrl, redisReady, type ConnectRedisOptions, type RedisAddress, type RedisClient } from './redis.js';
export { MemoryIdempotencyStore, type IdempotencyStore, type StoredResponse, type Claim as IdempotencyClaim, type IdempotencyTimes, type MemoryIdempotencyOptions } from './idempotency/store.js';
export { RedisIdempotencyStore } from './idempotency/redis-store.js';
export type { JobsOptions } from './jobs/options.js';
export { InProcessQueue, type JobQueue, type JobWork, type InProcessQueueOptions } from './jobs/queue.js';
export { BullMQQueue, type BullMQQueueOptions } from './jobs/bullmq-queue.js';
export { BullMQDeliveryQueue, type BullMQDeliveryQueueOptions } from './jobs/webhooks/bullmq-delivery-queue.js';
export { InProcessDeliveryQueue, type DeliveryQueue, type ScheduledDelivery, type DeliveryAttemptFn } from './jobs/webhooks/delivery-queue.js';
export { MemoryJobStore, type JobStore, type JobPatch } from './jobs/job-store.js';
export { RedisJobStore } from './jobs/redis-job-store.js';
export { LocalResultsStore, type ResultsStore } from './jobs/results-store.js';
export { S3ResultsStore, type S3ResultsStoreOptions } from './jobs/s3-results-store.js';
export type { JobRecord, JobState, ImageState, ImageStatus } from './jobs/job.js';
export { MemoryWebhookSecretStore, FileWebhookSecretStore, RedisWebhookSecretStore, newWebhookSecret, type WebhookSecretStore } from './jobs/webhooks/secrets.js';
export { MemoryDeliveryLog, RedisDeliveryLog, type DeliveryLog, type Delivery, type DeliveryAttempt } from './jobs/webhooks/deliveries.js';
