/**
 * Pool providers (DESIGN §8): where workers live. The local provider is light; the Kubernetes and
 * AWS Auto Scaling ones load their (large) SDKs, so they are reached through loaders and only the
 * process that chose one pays for it.
 */
export { createLocalProvider, type LocalProviderOptions } from './local-provider.ts';
export const loadKubernetesProvider = () => import('./k8s-provider.ts');
export const loadAsgProvider = () => import('./asg-provider.ts');
