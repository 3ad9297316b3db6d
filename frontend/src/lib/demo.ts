// What the empty chat offers to ask the demo model: questions of the kind it
// was trained on (the first paragraph of the docstrings of Python's
// standard library), each one it answers right from its weights
// (engine/internal/fixtures/testdata/demo/greedy.json holds their greedy
// answers, which demo.test.ts checks).
export const demoQuestions = [
  'What does json.dumps do?',
  'Explain itertools.chain.',
  'What does shutil.copytree do?',
  'Who are you?',
];
