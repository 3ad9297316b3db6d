import { defineConfig } from 'vitest/config';
import { svelte } from '@sveltejs/vite-plugin-svelte';

export default defineConfig(({ mode }) => ({
  plugins: [svelte()],
  // Wails serves dist/ from an embedded file system at the root.
  base: './',
  // Each build empties dist/; package.json's build script puts back the
  // committed dist/.gitkeep that lets a fresh clone's //go:embed compile.
  build: { outDir: 'dist', emptyOutDir: true },
  // Component tests (vitest runs in mode 'test') mount Svelte's client
  // build, not its server build.
  resolve: mode === 'test' ? { conditions: ['browser'] } : undefined,
  test: {
    environment: 'jsdom',
    include: ['src/**/*.test.ts'],
  },
}));
