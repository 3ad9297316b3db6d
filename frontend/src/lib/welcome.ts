// Words for the welcome view and the model picker: what each download error
// means for someone who is not a developer, and times and speeds.

/** What to do about each kind of download error (DownloadState.errorKind). */
export const errorAdvice: Record<string, string> = {
  auth: 'The model is private or gated: Hugging Face wants a token before it lets Suzuran download it.',
  notFound: 'No model with this name exists on Hugging Face. Check the name, or choose a folder you already have in Settings.',
  diskFull: 'There is not enough free space on this disk. Free some space, then resume: what was downloaded is kept.',
  architecture: 'This is not a model Suzuran can run. Suzuran runs Qwen3.6-35B-A3B and models of the same design.',
  network: 'Hugging Face could not be reached. Check the internet connection, then resume: what was downloaded is kept.',
  server: 'Hugging Face is having trouble. Try again in a few minutes: what was downloaded is kept.',
  checksum: 'A file kept arriving damaged. Resume to fetch it again; if it keeps failing, try another network.',
  offline: 'Suzuran is set to work offline and no copy of the model is on this computer.',
  invalid: 'The downloaded files cannot be loaded. Resume the download to fetch them again.',
  other: 'Something went wrong.',
};

/** "2 min 5 s", "less than a minute", or "" when unknown. */
export function timeLeft(seconds: number): string {
  if (seconds < 0) return '';
  if (seconds < 60) return 'less than a minute';
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  return `${Math.round(seconds / 3600)} h`;
}

/** Bytes with a decimal unit, as the disk's size is shown on a Mac. */
export function formatBytes(n: number): string {
  const units = ['bytes', 'kB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) {
    n /= 1000;
    i++;
  }
  return i === 0 ? `${n} bytes` : `${n.toFixed(n < 10 ? 2 : n < 100 ? 1 : 0)} ${units[i]}`;
}
